//! Releases as a user sees them: publishing to a Directory and a Webhook target, what lands
//! there, what is recorded, what is refused, and live status; on SQLite and PostgreSQL.

use crate::api::WEB;
use crate::helpers::{App, Resp, spawn_app};
use axum::body::Bytes;
use axum::http::StatusCode;
use changeflow::model::ValidationError;
use changeflow::store::MarkKind;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

const DB: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: db
data:
  size: small
";

fn assert_error(r: &Resp, status: u16, field: &str, words: &[&str]) {
    assert_eq!(r.status, status, "{}", r.text);
    assert_eq!(r.body["field"], field, "{}", r.text);
    let msg = r.body["error"].as_str().unwrap_or_default();
    for w in words {
        assert!(msg.contains(w), "'{msg}' should mention '{w}'");
    }
}

async fn space_with_units(app: &App, space: &str) {
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": space}))).await;
    app.ok("POST", &format!("/v1/spaces/{space}/units"), Some(json!({"Slug": "web", "Data": WEB}))).await;
    app.ok("POST", &format!("/v1/spaces/{space}/units"), Some(json!({"Slug": "db", "Data": DB}))).await;
}

async fn target(app: &App, space: &str, slug: &str, provider: &str, options: Value) {
    let body = json!({"Slug": slug, "ProviderType": provider, "Options": options});
    app.ok("POST", &format!("/v1/spaces/{space}/targets"), Some(body)).await;
    app.ok("PATCH", &format!("/v1/spaces/{space}"), Some(json!({"ReleaseTarget": slug}))).await;
}

async fn publish(app: &App, space: &str, revision: Option<&str>) -> Resp {
    app.admin("POST", &format!("/v1/spaces/{space}/releases"), Some(json!({"Revision": revision}))).await
}

async fn published(app: &App, space: &str, revision: Option<&str>) -> Value {
    let r = publish(app, space, revision).await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body
}

async fn unit(app: &App, space: &str, slug: &str) -> Value {
    app.ok("GET", &format!("/v1/spaces/{space}/units/{slug}"), None).await
}

async fn release_nums(app: &App, space: &str) -> Vec<i64> {
    let list = app.ok("GET", &format!("/v1/spaces/{space}/releases"), None).await;
    list.as_array().unwrap().iter().map(|r| r["ReleaseNum"].as_i64().unwrap()).collect()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn id(v: &Value) -> Uuid {
    v.as_str().unwrap().parse().unwrap()
}

/// Marks revision `num` of `space/unit` with `tag`, straight through the store.
async fn mark(app: &App, tag: &Value, space: &str, unit_slug: &str, num: i64) {
    let u = unit(app, space, unit_slug).await;
    let store = &app.server.as_ref().unwrap().store;
    let mut tx = store.write().await.unwrap();
    tx.mark(MarkKind::Tag, id(&tag["TagID"]), id(&u["SpaceID"]), id(&u["UnitID"]), num).await.unwrap();
    tx.commit().await.unwrap();
}

/// Replaces the validation errors recorded on one revision, straight through the store.
async fn set_validation_errors(
    app: &App,
    space: &str,
    unit_slug: &str,
    num: i64,
    errors: Vec<ValidationError>,
) {
    let u = unit(app, space, unit_slug).await;
    let store = &app.server.as_ref().unwrap().store;
    let mut tx = store.write().await.unwrap();
    let (mut rev, _) = tx.must_revision(id(&u["UnitID"]), num).await.unwrap();
    rev.ValidationErrors = errors;
    tx.update_revision_meta(&rev).await.unwrap();
    tx.commit().await.unwrap();
}

async fn directory_scenario(backend: &str) {
    let app = spawn_app(backend).await;
    space_with_units(&app, "dev").await;
    let r = publish(&app, "dev", None).await;
    assert_error(&r, 422, "Space", &["'dev'", "no release target", "--release-target"]);

    let out = app.dir.path().join("gitops");
    target(&app, "dev", "out", "Directory", json!({"path": out.to_str().unwrap()})).await;
    let r = publish(&app, "dev", Some("7")).await;
    assert_error(&r, 400, "Revision", &["'7'", "Tag:<tag>", "ChangeOrder:"]);
    assert_eq!(r.body["value"], "7");

    // heads: the files land, the Units record what was released, the revisions are tagged
    let r1 = published(&app, "dev", None).await;
    assert_eq!((r1["ReleaseNum"].as_i64(), r1["Slug"].as_str()), (Some(1), Some("release-1")));
    assert_eq!(r1["RevisionSpec"], "");
    let dir = out.join("dev");
    assert_eq!(
        read(&dir.join("web.yaml")),
        app.admin("GET", "/v1/spaces/dev/units/web/data", None).await.text
    );
    assert_eq!(read(&dir.join("db.yaml")), DB);
    let manifest: Value = serde_json::from_str(&read(&dir.join("release.json"))).unwrap();
    assert_eq!(manifest["Digest"], r1["Digest"]);
    assert_eq!(manifest["ReleaseNum"], 1);
    assert_eq!(manifest["Units"].as_array().unwrap().len(), 2);
    for slug in ["web", "db"] {
        assert_eq!(unit(&app, "dev", slug).await["LastReleasedRevisionNum"], 1);
    }
    let revs = app.ok("GET", "/v1/spaces/dev/units/web/revisions", None).await;
    assert!(revs[0]["Tags"].as_array().unwrap().contains(&r1["TagID"]), "{revs}");
    let tag = app.ok("GET", "/v1/spaces/dev/tags/release-1", None).await;
    assert_eq!(tag["TagID"], r1["TagID"]);

    // a change, then a publish of unchanged content: same digest, next number
    let v2 = WEB.replace("web:1.0", "web:2.0");
    app.ok("PATCH", "/v1/spaces/dev/units/web", Some(json!({"Data": v2}))).await;
    let r2 = published(&app, "dev", Some("HeadRevisionNum")).await;
    assert_eq!(r2["ReleaseNum"], 2);
    assert_ne!(r2["Digest"], r1["Digest"]);
    assert!(read(&dir.join("web.yaml")).contains("web:2.0"));
    assert_eq!(unit(&app, "dev", "web").await["LastReleasedRevisionNum"], 2);
    let r3 = published(&app, "dev", None).await;
    assert_eq!(r3["ReleaseNum"], 3);
    assert_eq!(r3["Digest"], r2["Digest"], "same content, same digest");

    // Tag:<t> bundles what the tag marks, not the heads
    let v1 = app.ok("POST", "/v1/spaces/dev/tags", Some(json!({"Slug": "v1"}))).await;
    mark(&app, &v1, "dev", "web", 1).await;
    mark(&app, &v1, "dev", "db", 1).await;
    let r4 = published(&app, "dev", Some("Tag:v1")).await;
    assert_eq!(r4["RevisionSpec"], "Tag:v1");
    let web_rev =
        r4["Revisions"].as_array().unwrap().iter().find(|r| r["UnitSlug"] == "web").unwrap().clone();
    assert_eq!(web_rev["RevisionNum"], 1);
    assert!(read(&dir.join("web.yaml")).contains("web:1.0"));
    assert_eq!(r4["Digest"], r1["Digest"]);
    let web = unit(&app, "dev", "web").await;
    assert_eq!(
        (web["HeadRevisionNum"].as_i64(), web["LastReleasedRevisionNum"].as_i64()),
        (Some(2), Some(1))
    );

    // refusals record nothing and leave the files alone
    let partial = app.ok("POST", "/v1/spaces/dev/tags", Some(json!({"Slug": "partial"}))).await;
    mark(&app, &partial, "dev", "web", 2).await;
    let r = publish(&app, "dev", Some("Tag:partial")).await;
    assert_error(&r, 422, "Unit", &["db", "has not reached"]);
    assert_eq!(r.body["value"], "db");
    let r = publish(&app, "dev", Some("Tag:nope")).await;
    assert_eq!(r.status, 404, "{}", r.text);
    let bad = ValidationError {
        Source: "vet-test".into(),
        Resource: String::new(),
        Path: String::new(),
        Message: "replicas too low".into(),
    };
    set_validation_errors(&app, "dev", "web", 2, vec![bad]).await;
    let r = publish(&app, "dev", None).await;
    assert_error(&r, 422, "Unit", &["web", "revision 2", "replicas too low", "validation errors block"]);
    assert_eq!(release_nums(&app, "dev").await, [4, 3, 2, 1], "newest first, nothing recorded");
    assert!(read(&dir.join("web.yaml")).contains("web:1.0"));
    set_validation_errors(&app, "dev", "web", 2, vec![]).await;

    // a Unit no longer in the Space disappears from the folder
    app.ok("DELETE", "/v1/spaces/dev/units/db", None).await;
    let r5 = published(&app, "dev", None).await;
    assert_eq!(r5["ReleaseNum"], 5);
    assert!(!dir.join("db.yaml").exists());
    assert!(read(&dir.join("web.yaml")).contains("web:2.0"));

    // reading back: by number, slug, latest; a where expression
    for key in ["5", "release-5", "latest"] {
        assert_eq!(
            app.ok("GET", &format!("/v1/spaces/dev/releases/{key}"), None).await["ReleaseID"],
            r5["ReleaseID"]
        );
    }
    let q = "/v1/spaces/dev/releases?where=ReleaseNum%20%3C%203";
    assert_eq!(app.ok("GET", q, None).await.as_array().unwrap().len(), 2);

    // ReleaseNum counts per Target
    let out2 = app.dir.path().join("gitops2");
    target(&app, "dev", "out2", "Directory", json!({"path": out2.to_str().unwrap()})).await;
    let other = published(&app, "dev", None).await;
    assert_eq!((other["ReleaseNum"].as_i64(), other["Slug"].as_str()), (Some(1), Some("out2-release-1")));
    assert!(out2.join("dev/web.yaml").exists());
    assert_eq!(app.ok("GET", "/v1/spaces/dev/releases/1", None).await["ReleaseID"], other["ReleaseID"]);
    assert_eq!(app.ok("GET", "/v1/spaces/dev/targets/out2", None).await["LastReleaseNum"], 1);

    // racing publishes: each number is taken once; a loser is told to publish again
    let racing = futures::future::join_all((0..4).map(|_| publish(&app, "dev", None))).await;
    let mut won: Vec<i64> = vec![];
    for r in &racing {
        match r.status {
            201 => won.push(r.body["ReleaseNum"].as_i64().unwrap()),
            409 => assert_error(r, 409, "ReleaseNum", &["publish again"]),
            other => panic!("unexpected {other}: {}", r.text),
        }
    }
    won.sort();
    assert!(!won.is_empty());
    assert_eq!(won, (2..2 + won.len() as i64).collect::<Vec<_>>(), "distinct, consecutive numbers");
    let last = app.ok("GET", "/v1/spaces/dev/targets/out2", None).await["LastReleaseNum"].as_i64();
    assert_eq!(last, won.last().copied());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_to_directory_sqlite() {
    directory_scenario("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_to_directory_postgres() {
    directory_scenario("postgres").await;
}

/// A webhook receiver answering with `script` in turn (the last status repeats).
struct Hook {
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Hook {
    fn hits(&self) -> usize {
        self.bodies.lock().unwrap().len()
    }
}

async fn hook(script: &[u16]) -> Hook {
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let (seen, script) = (bodies.clone(), script.to_vec());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: Bytes| {
            let (seen, script) = (seen.clone(), script.clone());
            async move {
                let mut seen = seen.lock().unwrap();
                let status = script[seen.len().min(script.len() - 1)];
                seen.push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                StatusCode::from_u16(status).unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Hook { url, bodies }
}

async fn webhook_scenario(backend: &str) {
    let app = spawn_app(backend).await;
    space_with_units(&app, "hooked").await;

    // two 5xx, then success: published after retries, the receiver got the whole bundle
    let flaky = hook(&[500, 503, 200]).await;
    target(&app, "hooked", "flaky", "Webhook", json!({"url": flaky.url, "timeout-seconds": "5"})).await;
    let r1 = published(&app, "hooked", None).await;
    assert_eq!(flaky.hits(), 3);
    let got = flaky.bodies.lock().unwrap().last().unwrap().clone();
    assert_eq!(got["SpaceSlug"], "hooked");
    assert_eq!(got["Digest"], r1["Digest"]);
    assert_eq!(got["ReleaseNum"], 1);
    let web = got["Units"].as_array().unwrap().iter().find(|u| u["UnitSlug"] == "web").unwrap().clone();
    assert_eq!(web["Data"], WEB);

    // always 5xx: three attempts, then refused; nothing recorded
    let down = hook(&[500]).await;
    target(&app, "hooked", "down", "Webhook", json!({"url": down.url})).await;
    let r = publish(&app, "hooked", None).await;
    assert_error(&r, 422, "Target", &["'down'", "500", "after 3 attempt(s)", "nothing was recorded"]);
    assert_eq!(down.hits(), 3);

    // 4xx is final: one attempt
    let strict = hook(&[400]).await;
    target(&app, "hooked", "strict", "Webhook", json!({"url": strict.url})).await;
    let r = publish(&app, "hooked", None).await;
    assert_error(&r, 422, "Target", &["'strict'", "400", "not retried"]);
    assert_eq!(strict.hits(), 1);
    assert_eq!(release_nums(&app, "hooked").await, [1]);
    assert_eq!(unit(&app, "hooked", "web").await["LastReleasedRevisionNum"], 1);
    assert_eq!(app.ok("GET", "/v1/spaces/hooked/targets/down", None).await["LastReleaseNum"], 0);

    // live status lands on the latest Release
    let report =
        json!({"Sync": "Synced", "Operation": "Succeeded", "Health": "Healthy", "Message": "all good"});
    let set = app.ok("PUT", "/v1/spaces/hooked/livestatus", Some(report)).await;
    assert_eq!(set["ReleaseID"], r1["ReleaseID"]);
    let latest = app.ok("GET", "/v1/spaces/hooked/releases/latest", None).await;
    assert_eq!(latest["LiveStatus"]["Health"], "Healthy");
    assert_eq!(latest["LiveStatus"]["Sync"], "Synced");
    assert_eq!(latest["LiveStatus"]["Message"], "all good");
    assert!(latest["LiveStatus"]["ObservedAt"].is_string());
    let q = "/v1/spaces/hooked/releases?where=LiveStatus.Health%20%3D%20%27Healthy%27";
    assert_eq!(app.ok("GET", q, None).await.as_array().unwrap().len(), 1);
    let bad = json!({"Sync": "Synced", "Operation": "Succeeded", "Health": "Fine"});
    let r = app.admin("PUT", "/v1/spaces/hooked/livestatus", Some(bad)).await;
    assert_error(&r, 400, "Health", &["'Fine'", "Healthy, Progressing"]);
    assert_eq!(r.body["value"], "Fine");
    let bad =
        json!({"Sync": "Synced", "Operation": "Succeeded", "Health": "Healthy", "ObservedAt": "yesterday"});
    assert_error(
        &app.admin("PUT", "/v1/spaces/hooked/livestatus", Some(bad)).await,
        400,
        "ObservedAt",
        &["RFC 3339"],
    );
    let still = app.ok("GET", "/v1/spaces/hooked/releases/1", None).await;
    assert_eq!(still["LiveStatus"]["Message"], "all good", "a refused report changes nothing");

    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "quiet"}))).await;
    let ok = json!({"Sync": "Synced", "Operation": "Succeeded", "Health": "Healthy"});
    assert_error(
        &app.admin("PUT", "/v1/spaces/quiet/livestatus", Some(ok)).await,
        422,
        "Space",
        &["'quiet'", "no Release"],
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_to_webhook_and_live_status_sqlite() {
    webhook_scenario("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_to_webhook_and_live_status_postgres() {
    webhook_scenario("postgres").await;
}

fn cf(app: &App, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_changeflow"))
        .args(args)
        .env("CHANGEFLOW_SERVER", &app.url)
        .env("CHANGEFLOW_TOKEN", &app.token)
        .env_remove("CHANGEFLOW_DATA_DIR")
        .output()
        .expect("binary runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_publishes_and_reports() {
    let app = spawn_app("sqlite").await;
    space_with_units(&app, "dev").await;
    let out = app.dir.path().join("gitops");
    target(&app, "dev", "out", "Directory", json!({"path": out.to_str().unwrap()})).await;
    let app = tokio::task::spawn_blocking(move || {
        let help = cf(&app, &["release", "publish", "--help"]);
        assert!(help.contains("Before:ChangeOrder:") && help.contains("--release-target"), "{help}");
        let table = cf(&app, &["release", "publish", "dev"]);
        assert!(
            table.lines().nth(1).is_some_and(|l| l.starts_with("1 ") && l.contains("release-1")),
            "{table}"
        );
        cf(
            &app,
            &[
                "livestatus",
                "set",
                "dev",
                "--sync",
                "Synced",
                "--operation",
                "Running",
                "--health",
                "Progressing",
            ],
        );
        let shown = cf(&app, &["release", "get", "1", "--space", "dev"]);
        assert!(
            shown.contains("Progressing") && shown.contains("Digest: ") && shown.contains("web"),
            "{shown}"
        );
        let json: Value =
            serde_json::from_str(&cf(&app, &["release", "list", "--space", "dev", "-o", "json"])).unwrap();
        assert_eq!(json[0]["LiveStatus"]["Operation"], "Running");
        app
    })
    .await
    .unwrap();
    assert!(out.join("dev/web.yaml").exists());
    app.stop().await;
}
