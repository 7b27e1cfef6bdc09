//! The HTTP API as a client sees it, on SQLite and on PostgreSQL.

use crate::helpers::{App, spawn_app};
use serde_json::{Value, json};

pub const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: web
          image: web:1.0
";

const DB: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: db
data:
  size: small
";

async fn base_with_variants(app: &App) {
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "base", "Labels": {"Component": "shop"}}))).await;
    app.ok("POST", "/v1/spaces/base/units", Some(json!({"Slug": "web", "Data": WEB}))).await;
    app.ok("POST", "/v1/spaces/base/units", Some(json!({"Slug": "db", "Data": DB}))).await;
    for stage in ["dev", "staging", "prod"] {
        let v = app
            .ok("POST", "/v1/spaces/base/variants", Some(json!({"Slug": stage, "Labels": {"Stage": stage}})))
            .await;
        assert_eq!(v["Units"].as_array().unwrap().len(), 2);
        assert_eq!(v["Space"]["Labels"]["Component"], "shop", "labels are inherited");
        assert_eq!(v["Space"]["Labels"]["Stage"], stage, "and overridden");
    }
}

async fn upgrade_scenario(backend: &str) {
    let app = spawn_app(backend).await;
    base_with_variants(&app).await;
    // prod protects its replica count
    let prod = WEB.replace("replicas: 2", "replicas: 5");
    let r = app.ok("PATCH", "/v1/spaces/prod/units/web", Some(json!({"Data": prod, "Protect": true}))).await;
    assert_eq!(r["Protected"][0]["Path"], "spec.replicas");
    // two upstream edits
    let v2 = WEB.replace("web:1.0", "web:1.1");
    app.ok("PATCH", "/v1/spaces/base/units/web", Some(json!({"Data": v2, "ChangeDescription": "image 1.1"})))
        .await;
    let v3 = v2.replace("replicas: 2", "replicas: 3");
    app.ok(
        "PATCH",
        "/v1/spaces/base/units/web",
        Some(json!({"Data": v3, "ChangeDescription": "3 replicas"})),
    )
    .await;
    let base_web = app.ok("GET", "/v1/spaces/base/units/web", None).await;
    assert_eq!(base_web["HeadRevisionNum"], 3);

    for stage in ["dev", "staging", "prod"] {
        let before = app.ok("GET", &format!("/v1/spaces/{stage}/units/web"), None).await;
        let r = app.ok("POST", &format!("/v1/spaces/{stage}/units/web/upgrade"), Some(json!({}))).await;
        let revs = r["Revisions"].as_array().unwrap();
        assert_eq!(r["UpstreamLastMergedRevisionNum"], 3);
        let links = app.ok("GET", &format!("/v1/spaces/{stage}/links"), None).await;
        let link = links.as_array().unwrap().iter().find(|l| l["Slug"] == "web").unwrap().clone();
        assert_eq!(link["UpstreamLastMergedRevisionNum"], 3, "cursor equals the upstream head");
        let after = app.ok("GET", &format!("/v1/spaces/{stage}/units/web"), None).await;
        assert_eq!(link["DownstreamLastMergedRevisionNum"], after["HeadRevisionNum"]);
        assert_eq!(after["UpstreamRevisionNum"], 3);
        let data = app.admin("GET", &format!("/v1/spaces/{stage}/units/web/data"), None).await.text;
        assert!(data.contains("web:1.1"), "{stage}: {data}");
        if stage == "prod" {
            // the image change lands, the replica change is withheld: one new revision
            assert_eq!(revs.len(), 1);
            assert!(data.contains("replicas: 5"), "{data}");
            let conflicts = app.ok("GET", "/v1/spaces/prod/units/web/conflicts", None).await;
            let c = &conflicts.as_array().unwrap()[0];
            assert_eq!(c["Path"], "spec.replicas");
            assert_eq!(c["Reason"], "ProtectedPath");
            assert_eq!(c["UpstreamValue"], 3);
        } else {
            assert_eq!(revs.len(), 2, "one downstream revision per upstream revision");
            assert_eq!(
                after["HeadRevisionNum"].as_i64().unwrap(),
                before["HeadRevisionNum"].as_i64().unwrap() + 2
            );
            assert!(data.contains("replicas: 3"), "{data}");
            assert_eq!(after["Conflicts"], json!([]));
            let history = app.ok("GET", &format!("/v1/spaces/{stage}/units/web/revisions"), None).await;
            let sources: Vec<&str> =
                history.as_array().unwrap().iter().map(|r| r["Source"].as_str().unwrap()).collect();
            assert_eq!(sources, ["CloneUnit", "UpgradeUnit", "UpgradeUnit"]);
        }
        // a second upgrade has nothing to do
        let again = app.ok("POST", &format!("/v1/spaces/{stage}/units/web/upgrade"), Some(json!({}))).await;
        assert_eq!(again["Revisions"], json!([]));
    }

    let q = "/v1/units?where=Space.Labels.Stage%20%3D%20%27prod%27";
    let prod_units = app.ok("GET", q, None).await;
    let prod_id = app.ok("GET", "/v1/spaces/prod", None).await["SpaceID"].clone();
    let list = prod_units.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|u| u["SpaceID"] == prod_id));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_scenario_sqlite() {
    upgrade_scenario("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_scenario_postgres() {
    upgrade_scenario("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn squash_and_variant_promote() {
    let app = spawn_app("sqlite").await;
    base_with_variants(&app).await;
    let v2 = WEB.replace("web:1.0", "web:2.0");
    app.ok("PATCH", "/v1/spaces/base/units/web", Some(json!({"Data": v2}))).await;
    let v3 = v2.replace("replicas: 2", "replicas: 4");
    app.ok("PATCH", "/v1/spaces/base/units/web", Some(json!({"Data": v3}))).await;
    let r = app.ok("POST", "/v1/spaces/dev/units/web/upgrade", Some(json!({"Squash": true}))).await;
    assert_eq!(r["Revisions"].as_array().unwrap().len(), 1, "squash writes one revision for the range");
    // a unit added upstream later is cloned by variant promote, the behind one upgraded
    app.ok(
        "POST",
        "/v1/spaces/base/units",
        Some(json!({"Slug": "cache", "Data": DB.replace("name: db", "name: cache")})),
    )
    .await;
    let out = app.ok("POST", "/v1/spaces/staging/promote", Some(json!({}))).await;
    let outcome =
        |slug: &str| out.as_array().unwrap().iter().find(|u| u["Slug"] == slug).unwrap()["Outcome"].clone();
    assert_eq!(outcome("web"), "Upgrade");
    assert_eq!(outcome("db"), "UpToDate");
    assert_eq!(outcome("cache"), "Clone");
    let cache = app.ok("GET", "/v1/spaces/staging/units/cache", None).await;
    assert!(cache["UpstreamUnitID"].is_string());
    app.stop().await;
}

async fn assert_error(r: crate::helpers::Resp, status: u16, field: &str, words: &[&str]) {
    assert_eq!(r.status, status, "{}", r.text);
    assert_eq!(r.body["field"], field, "{}", r.text);
    let msg = r.body["error"].as_str().unwrap_or_default();
    for w in words {
        assert!(msg.contains(w), "'{msg}' should mention '{w}'");
    }
}

async fn bad_input(backend: &str) {
    let app = spawn_app(backend).await;
    base_with_variants(&app).await;
    let units_before = app.ok("GET", "/v1/units", None).await;

    let r = app.admin("GET", "/v1/units?where=Slug%20%3D%20%27web%27%20AND%20Labels.x%20%3D%3D", None).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.body["error"].as_str().unwrap().contains("column"), "{}", r.text);
    let r = app.admin("GET", "/v1/spaces?where=Nope%20%3D%20%27x%27", None).await;
    assert_eq!(r.status, 400);
    assert!(r.body["error"].as_str().unwrap().contains("Nope"), "{}", r.text);

    // invalid YAML writes no unit
    let r = app
        .admin("POST", "/v1/spaces/base/units", Some(json!({"Slug": "broken", "Data": "a: [1, 2\n"})))
        .await;
    assert_error(r, 400, "Data", &["YAML"]).await;
    let r = app.admin("POST", "/v1/spaces/base/units", Some(json!({"Slug": "-bad", "Data": WEB}))).await;
    assert_error(r, 400, "Slug", &["-bad"]).await;
    let r = app.admin("POST", "/v1/spaces/base/units", Some(json!({"Slug": "web", "Data": WEB}))).await;
    assert_error(r, 409, "Slug", &["web"]).await;
    let r = app
        .admin("POST", "/v1/spaces/base/units", Some(json!({"Slug": "x", "Data": WEB, "Colour": 1})))
        .await;
    assert_error(r, 400, "Colour", &["unknown field"]).await;

    // a stale Version is refused and changes nothing
    let web = app.ok("GET", "/v1/spaces/base/units/web", None).await;
    let v = web["Version"].as_i64().unwrap();
    app.ok(
        "PATCH",
        "/v1/spaces/base/units/web",
        Some(json!({"Data": WEB.replace("1.0", "1.5"), "Version": v})),
    )
    .await;
    let r = app
        .admin(
            "PATCH",
            "/v1/spaces/base/units/web",
            Some(json!({"Data": WEB.replace("1.0", "9.9"), "Version": v})),
        )
        .await;
    assert_error(r, 409, "Version", &["Version"]).await;
    let data = app.admin("GET", "/v1/spaces/base/units/web/data", None).await.text;
    assert!(data.contains("1.5") && !data.contains("9.9"));

    // functions: unknown, missing parameter
    let r = app
        .admin(
            "POST",
            "/v1/spaces/base/functions/do",
            Some(json!({"FunctionName": "set-imag", "Arguments": []})),
        )
        .await;
    assert_error(r, 400, "FunctionName", &["set-imag", "set-image"]).await;
    let r = app
        .admin(
            "POST",
            "/v1/spaces/base/functions/do",
            Some(json!({"FunctionName": "set-image", "Arguments": [{"Value": "web"}]})),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.body["error"].as_str().unwrap().contains("missing required parameter"), "{}", r.text);

    // authentication and permissions
    let r = app.call("GET", "/v1/spaces", None, None).await;
    assert_eq!(r.status, 401);
    let r = app.call("GET", "/v1/spaces", Some("cf_not_a_token"), None).await;
    assert_eq!(r.status, 401);
    app.ok("POST", "/v1/users", Some(json!({"Slug": "viewer", "Grants": ["dev=View"]}))).await;
    let token = app.ok("POST", "/v1/users/viewer/tokens", Some(json!({}))).await["Token"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app.call("GET", "/v1/spaces", Some(&token), None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.as_array().unwrap().len(), 1, "a viewer sees only the spaces granted");
    let r = app.call("PATCH", "/v1/spaces/dev/units/web", Some(&token), Some(json!({"Data": WEB}))).await;
    assert_error(r, 403, "Space", &["Edit", "dev"]).await;
    let r = app.call("GET", "/v1/spaces/prod", Some(&token), None).await;
    assert_eq!(r.status, 403);
    let r = app.call("POST", "/v1/users", Some(&token), Some(json!({"Slug": "eve", "Admin": true}))).await;
    assert_eq!(r.status, 403);

    let units_after = app.ok("GET", "/v1/units", None).await;
    assert_eq!(
        units_before.as_array().unwrap().len(),
        units_after.as_array().unwrap().len(),
        "nothing half-written"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_sqlite() {
    bad_input("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_postgres() {
    bad_input("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_and_invocations() {
    let app = spawn_app("sqlite").await;
    base_with_variants(&app).await;
    let r = app
        .ok("POST", "/v1/spaces/dev/functions/do", Some(json!({"FunctionName": "set-image", "Arguments": [{"Value": "web"}, {"Value": "web:3.0"}], "Unit": "web"})))
        .await;
    assert_eq!(r[0]["Changed"], true);
    assert_eq!(r[0]["RevisionNum"], 2);
    let revs = app.ok("GET", "/v1/spaces/dev/units/web/revisions", None).await;
    assert_eq!(revs[1]["Source"], "Invoke");
    // the same call again changes nothing and writes nothing
    let r = app
        .ok("POST", "/v1/spaces/dev/functions/do", Some(json!({"FunctionName": "set-image", "Arguments": [{"Value": "web"}, {"Value": "web:3.0"}], "Unit": "web"})))
        .await;
    assert_eq!(r[0]["Changed"], false);
    assert_eq!(r[0]["RevisionNum"], Value::Null);
    assert_eq!(app.ok("GET", "/v1/spaces/dev/units/web/revisions", None).await.as_array().unwrap().len(), 2);

    // a stored, parameterized invocation
    let inv = json!({"Slug": "bump", "Parameters": [{"Name": "image", "DataType": "String", "Required": true}],
                     "FunctionInvocations": [{"FunctionName": "set-image", "Arguments": [{"Value": "*"}, {"Value": "{{ .image }}"}]},
                                             {"FunctionName": "set-label", "Arguments": [{"Value": "bumped"}, {"Value": "yes"}]}]});
    app.ok("POST", "/v1/spaces/base/invocations", Some(inv)).await;
    let r = app
        .admin("POST", "/v1/spaces/prod/invoke", Some(json!({"Invocation": "base/bump", "Unit": "web"})))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["field"], "Parameters.image");
    let r = app
        .ok(
            "POST",
            "/v1/spaces/prod/invoke",
            Some(
                json!({"Invocation": "base/bump", "Parameters": {"image": "web:9"}, "Where": "Slug = 'web'"}),
            ),
        )
        .await;
    assert_eq!(r.as_array().unwrap().len(), 1);
    let data = app.admin("GET", "/v1/spaces/prod/units/web/data", None).await.text;
    assert!(data.contains("web:9") && data.contains("bumped:"), "{data}");
    // validators report without writing
    let r = app
        .ok("POST", "/v1/spaces/prod/functions/do", Some(json!({"FunctionName": "vet-cel", "Arguments": [{"Value": "r.kind != 'Deployment' || r.spec.replicas >= 3"}]})))
        .await;
    let web = r.as_array().unwrap().iter().find(|x| x["UnitSlug"] == "web").unwrap();
    assert_eq!(web["Validation"]["Passed"], false);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_limits_and_bootstrap() {
    let app = spawn_app("sqlite").await;
    let r = app.call("GET", "/healthz", None, None).await;
    assert_eq!(r.status, 200);
    let on_disk = std::fs::read_to_string(app.dir.path().join("admin.token")).unwrap();
    assert_eq!(on_disk.trim(), app.token);
    let r = app.admin("GET", "/v1/nope", None).await;
    assert_eq!(r.status, 404);
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "big"}))).await;
    // last: the server closes the connection after refusing an oversized body
    let huge = "a: b\n".repeat(1_000_000);
    let r = app.admin("POST", "/v1/spaces/big/units", Some(json!({"Slug": "huge", "Data": huge}))).await;
    assert_eq!(r.status, 413, "{}", &r.text[..r.text.len().min(200)]);
    assert_eq!(app.store_units().await, 0, "nothing written");
    app.stop().await;
}
