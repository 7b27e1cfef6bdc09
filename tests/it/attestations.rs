//! Attestations: who may approve, what an approval covers, revocation as a new record.

use crate::api::WEB;
use crate::helpers::{App, spawn_app};
use serde_json::{Value, json};

async fn user(app: &App, name: &str, grants: &[&str]) -> String {
    app.ok("POST", "/v1/users", Some(json!({"Slug": name, "Grants": grants}))).await;
    let t = app.ok("POST", &format!("/v1/users/{name}/tokens"), Some(json!({}))).await;
    t["Token"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_a_change_where_it_stands() {
    let app = spawn_app("sqlite").await;
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "base"}))).await;
    app.ok("POST", "/v1/spaces/base/units", Some(json!({"Slug": "web", "Data": WEB}))).await;
    app.ok("POST", "/v1/spaces/base/variants", Some(json!({"Slug": "dev"}))).await;
    app.ok("PATCH", "/v1/spaces/base/units/web", Some(json!({"Data": WEB.replace("1.0", "2.0")}))).await;
    app.ok("POST", "/v1/spaces/base/changeorders", Some(json!({"Slug": "bump"}))).await;
    let alice = user(&app, "alice", &["dev=Approve"]).await;
    let viewer = user(&app, "vic", &["dev=View"]).await;
    let body = json!({"ChangeOrder": "base/bump", "ExpiresIn": "72h", "Note": "looks good"});
    // nothing to attest before the change reached the Space
    let r = app.call("POST", "/v1/spaces/dev/attestations", Some(&alice), Some(body.clone())).await;
    assert_eq!(r.status, 422, "{}", r.text);
    app.ok("POST", "/v1/spaces/base/changeorders/bump/promote", Some(json!({"Space": "dev"}))).await;
    let r = app.call("POST", "/v1/spaces/dev/attestations", Some(&viewer), Some(body.clone())).await;
    assert_eq!(r.status, 403, "Approve is needed: {}", r.text);
    let r = app.call("POST", "/v1/spaces/dev/attestations", Some(&alice), Some(body.clone())).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let att = r.body;
    assert_eq!(att["Result"], "Pass");
    assert_eq!(att["Type"], "Approval");
    assert_eq!(att["Revisions"][0]["UnitSlug"], "web");
    assert_eq!(att["Revisions"][0]["RevisionNum"], 2, "the revision the end tag marks in dev");
    assert!(att["ExpiresAt"].is_string());
    let bad = json!({"ChangeOrder": "base/bump", "ExpiresIn": "3 weeks"});
    let r = app.call("POST", "/v1/spaces/dev/attestations", Some(&alice), Some(bad)).await;
    assert_eq!((r.status, r.body["field"].clone()), (400, json!("ExpiresIn")));
    // a rejection, then revoking the approval: both new records
    let mut reject = body.clone();
    reject["Reject"] = json!(true);
    app.call("POST", "/v1/spaces/dev/attestations", Some(&alice), Some(reject)).await;
    let slug = att["Slug"].as_str().unwrap();
    let r =
        app.call("POST", &format!("/v1/spaces/dev/attestations/{slug}/revoke"), Some(&viewer), None).await;
    assert_eq!(r.status, 403, "only its author or a manager revokes");
    let r = app.call("POST", &format!("/v1/spaces/dev/attestations/{slug}/revoke"), Some(&alice), None).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["RevokedAttestationID"], att["AttestationID"]);
    let r = app.call("POST", &format!("/v1/spaces/dev/attestations/{slug}/revoke"), Some(&alice), None).await;
    assert_eq!(r.status, 409);
    let all: Value = app.ok("GET", "/v1/spaces/dev/attestations?change_order=base/bump", None).await;
    let results: Vec<&str> = all.as_array().unwrap().iter().map(|a| a["Result"].as_str().unwrap()).collect();
    assert_eq!(results, ["Pass", "Fail", "Pass"]);
    app.stop().await;
}
