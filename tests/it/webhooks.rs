//! Webhook deliveries: only signed, recent, new deliveries act; anything else is 401 and
//! changes nothing.

use crate::api::WEB;
use crate::helpers::{App, spawn_app};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

fn sign(secret: &str, parts: &[&[u8]]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    for p in parts {
        mac.update(p);
    }
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

async fn post(app: &App, url: &str, headers: &[(&str, String)], body: &str) -> (u16, Value) {
    let mut req = app.http.post(format!("{}{url}", app.url)).body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn dev_revisions(app: &App) -> usize {
    app.ok("GET", "/v1/spaces/dev/units/web/revisions", None).await.as_array().unwrap().len()
}

async fn promotions(app: &App) -> usize {
    app.ok("GET", "/v1/promotions", None).await.as_array().unwrap().len()
}

fn signed(secret: &str, id: &str, body: &str) -> Vec<(&'static str, String)> {
    let ts = chrono::Utc::now().timestamp();
    vec![
        ("X-Changeflow-Timestamp", ts.to_string()),
        ("X-Changeflow-Delivery", id.to_string()),
        ("X-Changeflow-Signature", sign(secret, &[ts.to_string().as_bytes(), b".", body.as_bytes()])),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ci_build_rolls_out_its_image_and_argo_cd_reports_live_status() {
    let app = spawn_app("sqlite").await;
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "ops"}))).await;
    crate::promotions::edge_fleet(&app).await;
    // A malformed pointer is refused when the webhook is made.
    let bad = json!({"Slug": "ci", "Action": "invoke", "Invocation": "ops/bump-image",
                     "Parameters": {"image": "build.image"}, "WhereSpace": "Labels.Fleet = 'edge'"});
    let r = app.admin("POST", "/v1/spaces/ops/webhooks", Some(bad)).await;
    assert_eq!((r.status, r.body["field"].as_str()), (400, Some("Parameters.image")), "{}", r.text);
    let hook = app
        .ok(
            "POST",
            "/v1/spaces/ops/webhooks",
            Some(json!({"Slug": "ci", "Action": "invoke", "Invocation": "ops/bump-image",
                        "Parameters": {"image": "/build/image"}, "WhereSpace": "Labels.Fleet = 'edge'"})),
        )
        .await;
    let (url, secret) = (hook["URL"].as_str().unwrap(), hook["Secret"].as_str().unwrap());
    // A payload without the pointed value changes nothing.
    let (s, b) = post(&app, url, &signed(secret, "b0", r#"{"build": {}}"#), r#"{"build": {}}"#).await;
    assert_eq!((s, b["field"].as_str()), (400, Some("Parameters.image")), "{b}");
    let body = r#"{"build": {"image": "web:3.1"}}"#;
    let (s, b) = post(&app, url, &signed(secret, "b1", body), body).await;
    assert_eq!(s, 202, "{b}");
    let id = b["Result"]["Promotion"]["PromotionID"].as_str().unwrap().to_string();
    let p = crate::promotions::wait_end(&app, &id).await;
    assert_eq!(p["State"], "Completed", "{p:#}");
    assert_eq!(p["Counts"]["Done"], 3);
    for i in 0..3 {
        let r = app.admin("GET", &format!("/v1/spaces/edge-{i}/units/web/data"), None).await;
        assert!(r.text.contains("image: web:3.1"), "edge-{i}: {}", r.text);
    }
    // Argo CD's notification sets live status of the Space named like the Application.
    let target = app.dir.path().join("out");
    let t =
        json!({"Slug": "gitops", "ProviderType": "Directory", "Options": {"path": target.to_str().unwrap()}});
    app.ok("POST", "/v1/spaces/edge-0/targets", Some(t)).await;
    app.ok("PATCH", "/v1/spaces/edge-0", Some(json!({"ReleaseTarget": "gitops"}))).await;
    app.ok("POST", "/v1/spaces/edge-0/releases", Some(json!({}))).await;
    let argo = app
        .ok("POST", "/v1/spaces/ops/webhooks", Some(json!({"Slug": "argo", "Action": "livestatus"})))
        .await;
    let note = r#"{"app": {"metadata": {"name": "edge-0"}, "status": {"sync": {"status": "Synced"}, "health": {"status": "Healthy"}, "operationState": {"phase": "Succeeded"}}}}"#;
    let (s, b) = post(
        &app,
        argo["URL"].as_str().unwrap(),
        &signed(argo["Secret"].as_str().unwrap(), "a1", note),
        note,
    )
    .await;
    assert_eq!(s, 202, "{b}");
    assert_eq!(b["Result"]["LiveStatus"]["Health"], "Healthy", "{b:#}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_signed_recent_new_deliveries_act() {
    let app = spawn_app("sqlite").await;
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "base"}))).await;
    app.ok("POST", "/v1/spaces/base/units", Some(json!({"Slug": "web", "Data": WEB}))).await;
    app.ok("POST", "/v1/spaces/base/variants", Some(json!({"Slug": "dev"}))).await;
    app.ok("PATCH", "/v1/spaces/base/units/web", Some(json!({"Data": WEB.replace("1.0", "2.0")}))).await;
    app.ok("POST", "/v1/spaces/base/changeorders", Some(json!({"Slug": "bump"}))).await;
    let hook = app
        .ok(
            "POST",
            "/v1/spaces/base/webhooks",
            Some(json!({"Slug": "ci", "Action": "promote", "ChangeOrder": "base/bump"})),
        )
        .await;
    let (url, secret) =
        (hook["URL"].as_str().unwrap().to_string(), hook["Secret"].as_str().unwrap().to_string());
    assert!(secret.starts_with("whsec_"));
    let listed = app.ok("GET", "/v1/spaces/base/webhooks", None).await;
    assert!(listed[0].get("Secret").is_none(), "the secret is shown once");
    let body = r#"{"build": 42}"#;
    let now = chrono::Utc::now().timestamp();
    let headers = |ts: i64, id: &str, sig: String| {
        vec![
            ("X-Changeflow-Timestamp", ts.to_string()),
            ("X-Changeflow-Delivery", id.to_string()),
            ("X-Changeflow-Signature", sig),
        ]
    };
    let good = |ts: i64| sign(&secret, &[ts.to_string().as_bytes(), b".", body.as_bytes()]);
    // refused: wrong secret, tampered body, old timestamp, unsigned
    let (s, b) = post(
        &app,
        &url,
        &headers(now, "d1", sign("wrong", &[now.to_string().as_bytes(), b".", body.as_bytes()])),
        body,
    )
    .await;
    assert_eq!(s, 401, "{b}");
    let (s, _) = post(&app, &url, &headers(now, "d2", good(now)), r#"{"build": 43}"#).await;
    assert_eq!(s, 401);
    let old = now - 600;
    let (s, b) = post(&app, &url, &headers(old, "d3", good(old)), body).await;
    assert_eq!(s, 401);
    assert!(b["error"].as_str().unwrap().contains("five minutes"), "{b}");
    let (s, _) = post(&app, &url, &[("X-Changeflow-Delivery", "d4".to_string())], body).await;
    assert_eq!(s, 401);
    assert_eq!(dev_revisions(&app).await, 1, "nothing was promoted");
    assert_eq!(promotions(&app).await, 0, "nothing was enqueued");
    assert_eq!(app.server.as_ref().unwrap().jobs.queue.depth().await.unwrap(), 0);
    // accepted once: a Promotion is queued and runs
    let (s, b) = post(&app, &url, &headers(now, "d5", good(now)), body).await;
    assert_eq!(s, 202, "{b}");
    assert_eq!(b["Result"]["Source"], "webhook:ci");
    let id = b["Result"]["PromotionID"].as_str().unwrap().to_string();
    let p = crate::promotions::wait_end(&app, &id).await;
    assert_eq!(p["State"], "Completed", "{p:#}");
    assert_eq!(dev_revisions(&app).await, 2);
    let (s, b) = post(&app, &url, &headers(now, "d5", good(now)), body).await;
    assert_eq!(s, 401, "a replayed delivery ID is refused: {b}");
    assert_eq!(promotions(&app).await, 1, "the replay enqueued nothing");
    // GitHub's signature over the body is accepted too (here: an attestation by the owner)
    let gh = app
        .ok(
            "POST",
            "/v1/spaces/base/webhooks",
            Some(json!({"Slug": "gh", "Action": "attest", "ChangeOrder": "base/bump", "Type": "ci-passed", "AttestSpace": "dev"})),
        )
        .await;
    let gh_secret = gh["Secret"].as_str().unwrap();
    let gh_headers = vec![
        ("X-GitHub-Delivery", "gh-1".to_string()),
        ("X-Hub-Signature-256", sign(gh_secret, &[body.as_bytes()])),
    ];
    let (s, b) = post(&app, gh["URL"].as_str().unwrap(), &gh_headers, body).await;
    assert_eq!(s, 202, "{b}");
    assert_eq!(b["Result"]["Type"], "ci-passed");
    let (s, _) = post(&app, "/v1/webhooks/not-a-uuid", &gh_headers, body).await;
    assert_eq!(s, 401);
    app.stop().await;
}
