//! ChangeOrders end to end: the seed's story on a chain of variants, the refusals, idempotence,
//! Invoke orders across unrelated Spaces, and bounded reads.

use crate::api::WEB;
use crate::helpers::{App, spawn_app};
use serde_json::{Value, json};

const DB: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\ndata:\n  size: small\n";

/// base → dev → staging → prod → {prod-eu, prod-us}
async fn chain(app: &App) {
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "base", "Labels": {"Component": "shop"}}))).await;
    app.ok("POST", "/v1/spaces/base/units", Some(json!({"Slug": "web", "Data": WEB}))).await;
    app.ok("POST", "/v1/spaces/base/units", Some(json!({"Slug": "db", "Data": DB}))).await;
    for (from, to, stage) in [
        ("base", "dev", "dev"),
        ("dev", "staging", "staging"),
        ("staging", "prod", "prod"),
        ("prod", "prod-eu", "prod"),
        ("prod", "prod-us", "prod"),
    ] {
        app.ok(
            "POST",
            &format!("/v1/spaces/{from}/variants"),
            Some(json!({"Slug": to, "Labels": {"Stage": stage}})),
        )
        .await;
    }
}

async fn edit_base(app: &App) {
    let v2 = WEB.replace("web:1.0", "web:2.0");
    app.ok("PATCH", "/v1/spaces/base/units/web", Some(json!({"Data": v2, "ChangeDescription": "web 2.0"})))
        .await;
    let v3 = v2.replace("replicas: 2", "replicas: 4");
    app.ok(
        "PATCH",
        "/v1/spaces/base/units/web",
        Some(json!({"Data": v3, "ChangeDescription": "4 replicas"})),
    )
    .await;
}

async fn co(app: &App) -> Value {
    app.ok("GET", "/v1/spaces/base/changeorders/bump", None).await
}

async fn promote(app: &App, space: Option<&str>) -> Value {
    app.ok("POST", "/v1/spaces/base/changeorders/bump/promote", Some(json!({"Space": space}))).await
}

fn outcomes(p: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = p["Spaces"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["Plan"]["Units"].as_array().unwrap().iter().map(|u| {
                (u["Unit"].as_str().unwrap().to_string(), u["Outcome"].as_str().unwrap().to_string())
            })
        })
        .collect();
    v.sort();
    v
}

async fn space_id(app: &App, slug: &str) -> String {
    app.ok("GET", &format!("/v1/spaces/{slug}"), None).await["SpaceID"].as_str().unwrap().to_string()
}

async fn revisions(app: &App, space: &str, unit: &str) -> Vec<Value> {
    app.ok("GET", &format!("/v1/spaces/{space}/units/{unit}/revisions"), None)
        .await
        .as_array()
        .unwrap()
        .clone()
}

async fn the_story(backend: &str) {
    let app = spawn_app(backend).await;
    chain(&app).await;
    edit_base(&app).await;
    let created = app
        .ok("POST", "/v1/spaces/base/changeorders", Some(json!({"Slug": "bump", "Description": "web 2.0"})))
        .await;
    assert_eq!(created["State"], "New");
    assert_eq!(created["InScopeSpaceIDs"].as_array().unwrap().len(), 5, "scope = where the links reach");
    let covered = created["CoveredUnits"].as_array().unwrap();
    let web = covered.iter().find(|c| c["Slug"] == "web").unwrap();
    assert_eq!((web["StartRevisionNum"].as_i64(), web["EndRevisionNum"].as_i64()), (Some(1), Some(3)));
    let db = covered.iter().find(|c| c["Slug"] == "db").unwrap();
    assert_eq!(
        db["StartRevisionNum"], db["EndRevisionNum"],
        "a unit the change carries nothing for is marked"
    );
    let tags = app.ok("GET", "/v1/spaces/base/tags", None).await;
    let slugs: Vec<&str> = tags.as_array().unwrap().iter().map(|t| t["Slug"].as_str().unwrap()).collect();
    assert_eq!(slugs, ["bump-co-end", "bump-co-start"]);
    let base_revs = revisions(&app, "base", "web").await;
    assert!(base_revs[0]["ChangeOrders"].as_array().unwrap().is_empty());
    assert_eq!(base_revs[1]["ChangeOrders"], json!([created["ChangeOrderID"]]));
    assert_eq!(base_revs[2]["ChangeOrders"], json!([created["ChangeOrderID"]]));

    // hop by hop: staging cannot take it before dev
    let r = app
        .admin("POST", "/v1/spaces/base/changeorders/bump/promote", Some(json!({"Space": "staging"})))
        .await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["error"].as_str().unwrap().contains("'dev'"), "{}", r.text);

    let p = promote(&app, Some("dev")).await;
    assert_eq!(outcomes(&p), [("db".into(), "Mark".into()), ("web".into(), "Upgrade".into())]);
    assert_eq!(co(&app).await["State"], "InProgress");
    let dev = revisions(&app, "dev", "web").await;
    assert_eq!(dev.len(), 3, "one downstream revision per upstream revision");
    assert_eq!(dev[2]["ChangeOrders"], json!([created["ChangeOrderID"]]));
    assert_eq!(dev[0]["Tags"].as_array().unwrap().len(), 1, "start tag on the head before the merge");
    assert_eq!(dev[2]["Tags"].as_array().unwrap().len(), 1, "end tag where the merge arrived");

    // a second promotion of the same Space changes nothing
    let again = promote(&app, Some("dev")).await;
    assert!(outcomes(&again).iter().all(|(_, o)| o == "Skip"), "{again}");
    assert_eq!(revisions(&app, "dev", "web").await.len(), 3);

    promote(&app, Some("staging")).await;
    promote(&app, Some("prod")).await;
    let rest = promote(&app, None).await;
    let mut spaces: Vec<&str> =
        rest["Spaces"].as_array().unwrap().iter().map(|s| s["Space"].as_str().unwrap()).collect();
    spaces.sort();
    assert_eq!(spaces, ["prod-eu", "prod-us"], "only the Spaces still waiting");
    let now = co(&app).await;
    assert_eq!(now["State"], "Resolved");
    assert_eq!(now["ResolvedSpaceIDs"].as_array().unwrap().len(), 6);
    let data = app.admin("GET", "/v1/spaces/prod-us/units/web/data", None).await.text;
    assert!(data.contains("web:2.0") && data.contains("replicas: 4"), "{data}");

    // State moves to Released as every Space in scope publishes what it took
    let out = app.dir.path().join("gitops");
    for (i, space) in ["dev", "staging", "prod", "prod-eu", "prod-us"].iter().enumerate() {
        let path = out.join(space);
        let t = json!({"Slug": "gitops", "ProviderType": "Directory", "Options": {"path": path.to_str().unwrap()}});
        app.ok("POST", &format!("/v1/spaces/{space}/targets"), Some(t)).await;
        app.ok("PATCH", &format!("/v1/spaces/{space}"), Some(json!({"ReleaseTarget": "gitops"}))).await;
        app.ok(
            "POST",
            &format!("/v1/spaces/{space}/releases"),
            Some(json!({"Revision": "ChangeOrder:base/bump"})),
        )
        .await;
        let expect = if i < 4 { "Resolved" } else { "Released" };
        assert_eq!(co(&app).await["State"], expect, "after publishing {space}");
    }
    assert_eq!(co(&app).await["ReleasedSpaceIDs"].as_array().unwrap().len(), 5);

    // the derived sets are queryable
    let eu = space_id(&app, "prod-eu").await;
    let q = format!(
        "/v1/changeorders?where={}",
        urlencode(&format!("ResolvedSpaceIDs ? '{eu}' AND LEN(ResolvedSpaceIDs) > 3"))
    );
    assert_eq!(app.ok("GET", &q, None).await.as_array().unwrap().len(), 1);
    let q = format!("/v1/changeorders?where={}", urlencode("State = 'New'"));
    assert_eq!(app.ok("GET", &q, None).await.as_array().unwrap().len(), 0);

    // a later base edit is not part of this change: promotion stops at the end tag
    let v4 = WEB.replace("web:1.0", "web:3.0");
    app.ok("PATCH", "/v1/spaces/base/units/web", Some(json!({"Data": v4}))).await;
    let p = promote(&app, Some("dev")).await;
    assert!(outcomes(&p).iter().all(|(_, o)| o == "Skip"));
    assert!(!app.admin("GET", "/v1/spaces/dev/units/web/data", None).await.text.contains("web:3.0"));

    // abort refuses every promotion; undo restores a Space in one step
    let r = app
        .admin("POST", "/v1/spaces/base/changeorders/bump/demote", Some(json!({"Space": "prod-us"})))
        .await;
    assert_eq!(r.status, 422);
    assert!(r.body["error"].as_str().unwrap().contains("not aborted"), "{}", r.text);
    let aborted = app
        .ok("PATCH", "/v1/spaces/base/changeorders/bump", Some(json!({"AbortedReason": "bad image"})))
        .await;
    assert_eq!(aborted["State"], "Aborted");
    let r =
        app.admin("POST", "/v1/spaces/base/changeorders/bump/promote", Some(json!({"Space": "dev"}))).await;
    assert_eq!(r.status, 422);
    assert!(r.body["error"].as_str().unwrap().contains("aborted"), "{}", r.text);
    let undone =
        app.ok("POST", "/v1/spaces/base/changeorders/bump/demote", Some(json!({"Space": "prod-us"}))).await;
    let web_undo = undone.as_array().unwrap().iter().find(|u| u["Unit"] == "web").unwrap();
    assert_eq!(web_undo["Outcome"], "Restore");
    let data = app.admin("GET", "/v1/spaces/prod-us/units/web/data", None).await.text;
    assert!(data.contains("web:1.0") && data.contains("replicas: 2"), "{data}");
    let r = app.admin("PATCH", "/v1/spaces/base/changeorders/bump", Some(json!({"AbortedReason": ""}))).await;
    assert_eq!(r.status, 422, "an undo cannot be taken back");
    let after = co(&app).await;
    assert_eq!(after["RestoredSpaceIDs"].as_array().unwrap().len(), 1);
    assert_eq!(after["State"], "Aborted", "partly undone");

    // delete takes its marks back
    app.ok("DELETE", "/v1/spaces/base/changeorders/bump", None).await;
    assert!(app.ok("GET", "/v1/spaces/base/tags", None).await.as_array().unwrap().is_empty());
    let revs = revisions(&app, "dev", "web").await;
    let co_tags = [created["StartTagID"].clone(), created["EndTagID"].clone()];
    for r in &revs {
        assert!(r["ChangeOrders"].as_array().unwrap().is_empty(), "{r}");
        assert!(!r["Tags"].as_array().unwrap().iter().any(|t| co_tags.contains(t)), "{r}");
    }
    app.stop().await;
}

pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_story_sqlite() {
    the_story("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_story_postgres() {
    the_story("postgres").await;
}

async fn tags_and_units(app: &App) -> (usize, usize) {
    let tags = app.ok("GET", "/v1/tags", None).await.as_array().unwrap().len();
    let cos = app.ok("GET", "/v1/changeorders", None).await.as_array().unwrap().len();
    (tags, cos)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_write_nothing() {
    let app = spawn_app("sqlite").await;
    chain(&app).await;
    edit_base(&app).await;
    // a scope that skips a hop
    let r = app
        .admin(
            "POST",
            "/v1/spaces/base/changeorders",
            Some(json!({"Slug": "skip", "InScopeSpaces": ["dev", "prod"]})),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.text);
    let msg = r.body["error"].as_str().unwrap();
    assert!(msg.contains("'prod'") && msg.contains("'staging'"), "{msg}");
    assert_eq!(tags_and_units(&app).await, (0, 0));
    // disagreeing cursors: qa is cloned at the base's head, dev still sits at revision 1
    app.ok("POST", "/v1/spaces/base/variants", Some(json!({"Slug": "qa"}))).await;
    let r = app.admin("POST", "/v1/spaces/base/changeorders", Some(json!({"Slug": "split"}))).await;
    assert_eq!(r.status, 422, "{}", r.text);
    let msg = r.body["error"].as_str().unwrap();
    assert!(msg.contains("'web'") && msg.contains("dev at 1") && msg.contains("qa at 3"), "{msg}");
    assert_eq!(tags_and_units(&app).await, (0, 0));
    // a stale plan digest
    app.ok("POST", "/v1/spaces/dev/units/web/upgrade", Some(json!({}))).await;
    app.ok("POST", "/v1/spaces/qa/units/web/upgrade", Some(json!({}))).await;
    let v5 = WEB.replace("web:1.0", "web:10.0");
    app.ok("PATCH", "/v1/spaces/base/units/web", Some(json!({"Data": v5}))).await;
    app.ok("POST", "/v1/spaces/base/changeorders", Some(json!({"Slug": "bump", "InScopeSpaces": ["dev"]})))
        .await;
    let dry = app
        .ok(
            "POST",
            "/v1/spaces/base/changeorders/bump/promote",
            Some(json!({"Space": "dev", "DryRun": true})),
        )
        .await;
    let digest = dry["Spaces"][0]["Plan"]["Digest"].as_str().unwrap().to_string();
    let before = revisions(&app, "dev", "web").await.len();
    app.ok("PATCH", "/v1/spaces/dev/units/db", Some(json!({"Data": DB.replace("small", "large")}))).await;
    let r = app
        .admin(
            "POST",
            "/v1/spaces/base/changeorders/bump/promote",
            Some(json!({"Space": "dev", "ExpectedPlan": digest})),
        )
        .await;
    assert_eq!(r.status, 412, "{}", r.text);
    assert_eq!(r.body["field"], "ExpectedPlan");
    assert_eq!(revisions(&app, "dev", "web").await.len(), before, "nothing written");
    // out of scope
    let r =
        app.admin("POST", "/v1/spaces/base/changeorders/bump/promote", Some(json!({"Space": "qa"}))).await;
    assert_eq!(r.status, 422);
    assert!(r.body["error"].as_str().unwrap().contains("not in the scope"), "{}", r.text);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_killed_half_way_is_finished_by_running_it_again() {
    use changeflow::ops;
    let app = spawn_app("sqlite").await;
    chain(&app).await;
    edit_base(&app).await;
    let db2 = DB.replace("small", "medium");
    app.ok("PATCH", "/v1/spaces/base/units/db", Some(json!({"Data": db2}))).await;
    app.ok("POST", "/v1/spaces/base/changeorders", Some(json!({"Slug": "bump"}))).await;
    let store = app.server.as_ref().unwrap().store.clone();
    let actor = ops::authenticate(&store, &app.token).await.unwrap();
    let req = || ops::PromoteChangeOrder { Space: Some("dev".into()), ..Default::default() };
    let crash = ops::PromoteHooks { fail_after_units: Some(1) };
    let err = ops::promote_change_order(&store, &actor, "base", "bump", req(), &crash).await.unwrap_err();
    assert!(err.to_string().contains("injected failure"), "{err}");
    assert_eq!(revisions(&app, "dev", "db").await.len(), 1, "the Space rolled back whole");
    assert_eq!(revisions(&app, "dev", "web").await.len(), 1);
    assert_eq!(co(&app).await["State"], "New");
    let done =
        ops::promote_change_order(&store, &actor, "base", "bump", req(), &Default::default()).await.unwrap();
    assert!(done.Complete);
    // every upstream revision of the change arrived exactly once
    assert_eq!(revisions(&app, "dev", "web").await.len(), 3);
    assert_eq!(revisions(&app, "dev", "db").await.len(), 2);
    // a multi-Space promotion that fails part way keeps the Spaces it finished, and a rerun finishes
    app.ok("POST", "/v1/spaces/prod/units", Some(json!({"Slug": "blocker", "Data": DB}))).await;
    let stage_all = || ops::PromoteChangeOrder::default();
    let crash_in_prod = ops::PromoteHooks { fail_after_units: Some(3) };
    let r =
        ops::promote_change_order(&store, &actor, "base", "bump", stage_all(), &crash_in_prod).await.unwrap();
    assert!(!r.Complete);
    let failed: Vec<&str> = r.Spaces.iter().filter(|s| s.Error.is_some()).map(|s| s.Space.as_str()).collect();
    assert_eq!(failed, ["prod"], "staging (2 units) finished, prod (3 units) crashed after its third");
    let view = co(&app).await;
    assert_eq!(view["ResolvedSpaceIDs"].as_array().unwrap().len(), 3, "base, dev, staging");
    let r = ops::promote_change_order(&store, &actor, "base", "bump", stage_all(), &Default::default())
        .await
        .unwrap();
    assert!(r.Complete);
    assert_eq!(co(&app).await["State"], "Resolved");
    for space in ["staging", "prod", "prod-eu", "prod-us"] {
        assert_eq!(revisions(&app, space, "web").await.len(), 3, "{space}: merged once");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_a_variant_made_for_itself_travel_under_the_same_change_order() {
    let app = spawn_app("sqlite").await;
    chain(&app).await;
    // staging has a database Unit only it has, and prod already took it from staging
    app.ok(
        "POST",
        "/v1/spaces/staging/units",
        Some(json!({"Slug": "cache", "Data": DB.replace("name: db", "name: cache")})),
    )
    .await;
    app.ok("POST", "/v1/spaces/prod/promote", Some(json!({}))).await;
    app.ok(
        "PATCH",
        "/v1/spaces/staging/units/cache",
        Some(json!({"Data": DB.replace("name: db", "name: cache").replace("small", "big")})),
    )
    .await;
    edit_base(&app).await;
    app.ok("POST", "/v1/spaces/base/changeorders", Some(json!({"Slug": "bump"}))).await;
    promote(&app, Some("dev")).await;
    let p = promote(&app, Some("staging")).await;
    assert!(outcomes(&p).contains(&("cache".into(), "Mark".into())), "{p}");
    let p = promote(&app, Some("prod")).await;
    assert!(outcomes(&p).contains(&("cache".into(), "Upgrade".into())), "{p}");
    let data = app.admin("GET", "/v1/spaces/prod/units/cache/data", None).await.text;
    assert!(data.contains("big"), "prod took staging's own unit under the change: {data}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scope_by_selection_and_an_adopted_end_tag() {
    let app = spawn_app("postgres").await;
    chain(&app).await;
    edit_base(&app).await;
    let r = app
        .ok(
            "POST",
            "/v1/spaces/base/changeorders",
            Some(json!({"Slug": "early", "WhereSpace": "Labels.Stage IN ('dev', 'staging')"})),
        )
        .await;
    assert_eq!(r["InScopeSpaceIDs"].as_array().unwrap().len(), 2);
    let r = app
        .admin(
            "POST",
            "/v1/spaces/base/changeorders",
            Some(json!({"Slug": "bad", "WhereSpace": "Labels.Stage = 'prod'"})),
        )
        .await;
    assert_eq!(r.status, 422, "a selection that skips hops is refused: {}", r.text);
    let r = app
        .admin(
            "POST",
            "/v1/spaces/base/changeorders",
            Some(json!({"Slug": "bad", "WhereSpace": "Labels.Stage =="})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["field"], "WhereSpace");
    // a Space that comes to match later is taken in on --refresh-spaces
    app.ok("PATCH", "/v1/spaces/prod", Some(json!({"Labels": {"Stage": "staging"}}))).await;
    let before = app.ok("GET", "/v1/spaces/base/changeorders/early", None).await;
    assert_eq!(before["InScopeSpaceIDs"].as_array().unwrap().len(), 2, "an answer, not a standing query");
    let after =
        app.ok("PATCH", "/v1/spaces/base/changeorders/early", Some(json!({"RefreshSpaces": true}))).await;
    assert_eq!(after["InScopeSpaceIDs"].as_array().unwrap().len(), 3);
    // an adopted end tag bounds the change and is never written to
    let tag = app.ok("POST", "/v1/spaces/base/tags", Some(json!({"Slug": "v2-release"}))).await;
    let store = app.server.as_ref().unwrap().store.clone();
    let web = app.ok("GET", "/v1/spaces/base/units/web", None).await;
    let (web_id, base_id): (uuid::Uuid, uuid::Uuid) =
        (web["UnitID"].as_str().unwrap().parse().unwrap(), web["SpaceID"].as_str().unwrap().parse().unwrap());
    let tag_id: uuid::Uuid = tag["TagID"].as_str().unwrap().parse().unwrap();
    let mut tx = store.write().await.unwrap();
    tx.mark(changeflow::store::MarkKind::Tag, tag_id, base_id, web_id, 2).await.unwrap();
    tx.commit().await.unwrap();
    let r = app
        .ok("POST", "/v1/spaces/base/changeorders", Some(json!({"Slug": "adopt", "EndTag": "v2-release"})))
        .await;
    let web_cov = r["CoveredUnits"].as_array().unwrap().iter().find(|c| c["Slug"] == "web").unwrap().clone();
    assert_eq!(web_cov["EndRevisionNum"], 2);
    assert_eq!(r["SkippedUnits"][0]["Slug"], "db");
    app.ok("DELETE", "/v1/spaces/base/changeorders/adopt", None).await;
    let mut tx = store.read().await.unwrap();
    assert_eq!(
        tx.marked(changeflow::store::MarkKind::Tag, tag_id).await.unwrap().len(),
        1,
        "adopted tag untouched"
    );
    drop(tx);
    assert!(app.ok("GET", "/v1/spaces/base/tags/v2-release", None).await["TagID"].is_string());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invoke_change_order_across_unrelated_spaces() {
    let app = spawn_app("sqlite").await;
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "ops"}))).await;
    let inv = json!({"Slug": "bump-image", "Parameters": [{"Name": "image", "DataType": "String", "Required": true}],
                     "FunctionInvocations": [{"FunctionName": "set-image", "Arguments": [{"Value": "web"}, {"Value": "{{ .image }}"}]}]});
    app.ok("POST", "/v1/spaces/ops/invocations", Some(inv)).await;
    for i in 0..20 {
        let slug = format!("edge-{i:02}");
        app.ok("POST", "/v1/spaces", Some(json!({"Slug": slug, "Labels": {"Fleet": "edge"}}))).await;
        // not clones: each Space has its own replica count and an extra unit
        let data = WEB.replace("replicas: 2", &format!("replicas: {}", i + 1));
        app.ok("POST", &format!("/v1/spaces/{slug}/units"), Some(json!({"Slug": "web", "Data": data}))).await;
        app.ok("POST", &format!("/v1/spaces/{slug}/units"), Some(json!({"Slug": "cfg", "Data": DB}))).await;
    }
    let body = json!({"Slug": "bump", "UpdateType": "Invoke", "Invocation": "ops/bump-image",
                      "Parameters": {"image": "web:7.7"}, "WhereSpace": "Labels.Fleet = 'edge'", "WhereUnit": "Slug = 'web'"});
    let r = app.ok("POST", "/v1/spaces/ops/changeorders", Some(body.clone())).await;
    assert_eq!(r["InScopeSpaceIDs"].as_array().unwrap().len(), 20);
    assert_eq!(r["State"], "New");
    let mut missing = body.clone();
    missing["Slug"] = json!("bump2");
    missing["Parameters"] = json!({});
    let e = app.admin("POST", "/v1/spaces/ops/changeorders", Some(missing)).await;
    assert_eq!(e.status, 400, "{}", e.text);
    let p = app.ok("POST", "/v1/spaces/ops/changeorders/bump/promote", Some(json!({}))).await;
    assert!(p["Complete"].as_bool().unwrap());
    assert_eq!(p["Spaces"].as_array().unwrap().len(), 20);
    let view = app.ok("GET", "/v1/spaces/ops/changeorders/bump", None).await;
    assert_eq!(view["State"], "Resolved");
    for i in [0, 19] {
        let data = app.admin("GET", &format!("/v1/spaces/edge-{i:02}/units/web/data"), None).await.text;
        assert!(data.contains("web:7.7") && data.contains(&format!("replicas: {}", i + 1)), "{data}");
        let cfg = revisions(&app, &format!("edge-{i:02}"), "cfg").await;
        assert_eq!(cfg.len(), 1, "units outside the selection are untouched");
    }
    // a Unit added later counts against its Space until the Invocation runs on it
    let edge7 = space_id(&app, "edge-07").await;
    let late = json!({"Slug": "web", "Data": WEB});
    let r = app.admin("POST", "/v1/spaces/edge-07/units", Some(late)).await;
    assert_eq!(r.status, 409, "slug taken; add a second web-like unit under another slug instead");
    app.ok("POST", "/v1/spaces/edge-07/units", Some(json!({"Slug": "web-canary", "Data": WEB}))).await;
    let mut widened = app.ok("GET", "/v1/spaces/ops/changeorders/bump", None).await;
    // the selection is `Slug = 'web'`, so the canary is not covered: still resolved
    assert_eq!(widened["State"], "Resolved");
    app.ok("DELETE", "/v1/spaces/edge-07/units/web-canary", None).await;
    app.ok("DELETE", "/v1/spaces/edge-07/units/web", None).await;
    app.ok("POST", "/v1/spaces/edge-07/units", Some(json!({"Slug": "web", "Data": WEB}))).await;
    widened = app.ok("GET", "/v1/spaces/ops/changeorders/bump", None).await;
    assert!(!widened["ResolvedSpaceIDs"].as_array().unwrap().iter().any(|s| s == &json!(edge7)), "{widened}");
    assert_eq!(widened["State"], "InProgress");
    let p =
        app.ok("POST", "/v1/spaces/ops/changeorders/bump/promote", Some(json!({"Space": "edge-07"}))).await;
    assert_eq!(outcomes(&p), [("web".into(), "Invoke".into())]);
    assert_eq!(app.ok("GET", "/v1/spaces/ops/changeorders/bump", None).await["State"], "Resolved");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_change_order_takes_a_bounded_number_of_queries() {
    use changeflow::model::{ChangeOrder, ChangeOrderState, Space};
    for (spaces, taken) in [(20, 10), (2000, 1500)] {
        let (store, _dir) = crate::helpers::store("sqlite").await;
        crate::fleet::build(&store, spaces, 1, taken).await;
        let mut tx = store.read().await.unwrap();
        let base = tx.find::<Space>(None, "base").await.unwrap().unwrap();
        let co = tx.find::<ChangeOrder>(Some(base.SpaceID), "fleet-co").await.unwrap().unwrap();
        let before = tx.query_count();
        let view = changeflow::ops::view_change_order(&mut tx, co).await.unwrap();
        let used = tx.query_count() - before;
        assert_eq!(view.ResolvedSpaceIDs.len(), taken + 1, "the base and the Spaces that took it");
        assert_eq!(view.State, ChangeOrderState::InProgress);
        assert!(used <= 3, "{spaces} spaces: {used} queries");
    }
}
