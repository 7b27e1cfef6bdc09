//! ChangeWorkflows end to end: the seed's example workflow gating dev → staging → prod, release
//! gates, Final, force, a frozen definition, and refusals naming the Stage and field.

use crate::api::WEB;
use crate::helpers::{App, spawn_app};
use serde_json::{Value, json};

async fn user(app: &App, name: &str, grants: &[&str]) -> (String, String) {
    let u = app.ok("POST", "/v1/users", Some(json!({"Slug": name, "Grants": grants}))).await;
    let t = app.ok("POST", &format!("/v1/users/{name}/tokens"), Some(json!({}))).await;
    (u["UserID"].as_str().unwrap().to_string(), t["Token"].as_str().unwrap().to_string())
}

async fn as_user(app: &App, token: &str, method: &str, path: &str, body: Value) -> Value {
    let r = app.call(method, path, Some(token), Some(body)).await;
    assert!((200..300).contains(&r.status), "{method} {path}: {} {}", r.status, r.text);
    r.body
}

/// ops holds the workflow; base → dev → staging → prod, all of component shop, each publishing
/// to a directory.
async fn fleet(app: &App) {
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "ops"}))).await;
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "base", "Labels": {"Component": "shop"}}))).await;
    app.ok("POST", "/v1/spaces/base/units", Some(json!({"Slug": "web", "Data": WEB}))).await;
    for (from, to) in [("base", "dev"), ("dev", "staging"), ("staging", "prod")] {
        app.ok(
            "POST",
            &format!("/v1/spaces/{from}/variants"),
            Some(json!({"Slug": to, "Labels": {"Stage": to}})),
        )
        .await;
        let path = app.dir.path().join("gitops").join(to);
        let t = json!({"Slug": "gitops", "ProviderType": "Directory", "Options": {"path": path.to_str().unwrap()}});
        app.ok("POST", &format!("/v1/spaces/{to}/targets"), Some(t)).await;
        app.ok("PATCH", &format!("/v1/spaces/{to}"), Some(json!({"ReleaseTarget": "gitops"}))).await;
    }
}

fn refused(r: &crate::helpers::Resp, stage: &str, gates: &[(&str, &str)]) {
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.body["field"], "Stage");
    assert_eq!(r.body["value"], stage);
    let failing: Vec<(String, String)> = r.body["gates"]
        .as_array()
        .unwrap_or_else(|| panic!("no gates in {}", r.text))
        .iter()
        .filter(|g| g["Satisfied"] == json!(false))
        .map(|g| {
            (g["Prerequisite"].as_str().unwrap().to_string(), g["SpaceSlug"].as_str().unwrap().to_string())
        })
        .collect();
    for (gate, space) in gates {
        assert!(
            failing.contains(&(gate.to_string(), space.to_string())),
            "{gate} on {space} should fail: {failing:?}"
        );
    }
    assert_eq!(failing.len(), gates.len(), "{failing:?}");
}

const PROMOTE: &str = "/v1/spaces/base/changeorders/bump/promote";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_workflow_end_to_end() {
    let app = spawn_app("sqlite").await;
    fleet(&app).await;
    let (ann_id, ann) = user(&app, "ann", &["*=Edit", "staging=Approve"]).await;
    let (_, bob) = user(&app, "bob", &["staging=Approve"]).await;
    let (_, cat) = user(&app, "cat", &["staging=Approve"]).await;
    let (_, dan) = user(&app, "dan", &["staging=Approve"]).await;
    let (_, eve) = user(&app, "eve", &["staging=Approve"]).await;
    let (rel_id, rel) = user(&app, "rel", &["prod=Approve"]).await;
    let (_, pete) = user(&app, "pete", &["prod=Approve"]).await;
    let definition =
        changeflow::gates::EXAMPLE_WORKFLOW.replace("9b2c0f3e-5d7a-4a61-8f0e-2b6d1c4e7a90", &rel_id);
    app.ok(
        "POST",
        "/v1/spaces/ops/changeworkflows",
        Some(json!({"Slug": "rollout", "Definition": definition})),
    )
    .await;
    // ann writes the change in the base
    as_user(
        &app,
        &ann,
        "PATCH",
        "/v1/spaces/base/units/web",
        json!({"Data": WEB.replace("web:1.0", "web:2.0")}),
    )
    .await;
    let co = app
        .ok(
            "POST",
            "/v1/spaces/base/changeorders",
            Some(json!({"Slug": "bump", "ChangeWorkflow": "ops/rollout"})),
        )
        .await;
    assert_eq!(co["InScopeSpaceIDs"].as_array().unwrap().len(), 3, "every Space some Stage selects");
    assert_eq!(co["ChangeWorkflow"]["Stages"][2]["Name"], "prod");
    // the workflow edited afterwards changes nothing for this order
    let lax = "Stages:\n  - Name: dev\n    WhereSpace: \"Labels.Stage = 'dev'\"\n  - Name: staging\n    WhereSpace: \"Labels.Stage = 'staging'\"\n  - Name: prod\n    WhereSpace: \"Labels.Stage = 'prod'\"\n";
    app.ok("PATCH", "/v1/spaces/ops/changeworkflows/rollout", Some(json!({"Definition": lax}))).await;

    // dev: the first Stage's gates are never evaluated
    let p = as_user(&app, &ann, "POST", PROMOTE, json!({})).await;
    assert_eq!(p["Stages"][0]["Name"], "dev");
    assert_eq!(p["Stage"], "dev");
    // staging needs dev Validated and Released
    let r = app.call("POST", PROMOTE, Some(&ann), Some(json!({}))).await;
    refused(&r, "staging", &[("Released", "dev")]);
    assert!(r.body["error"].as_str().unwrap().contains("Released on dev"), "{}", r.text);
    app.ok("POST", "/v1/spaces/dev/releases", Some(json!({"Revision": "ChangeOrder:base/bump"}))).await;
    let p = as_user(&app, &ann, "POST", PROMOTE, json!({})).await;
    assert_eq!(p["Stage"], "staging");

    // prod: Released, Healthy, not-frozen and two approvals of the change in staging
    app.ok("PATCH", "/v1/spaces/staging", Some(json!({"Annotations": {"code-freeze": "true"}}))).await;
    let r = app.call("POST", PROMOTE, Some(&ann), Some(json!({"TargetStage": "prod"}))).await;
    refused(
        &r,
        "prod",
        &[
            ("Released", "staging"),
            ("Healthy", "staging"),
            ("not-frozen", "staging"),
            ("approved", "staging"),
        ],
    );
    app.ok("POST", "/v1/spaces/staging/releases", Some(json!({"Revision": "ChangeOrder:base/bump"}))).await;
    let live = json!({"Sync": "Synced", "Operation": "Succeeded", "Health": "Healthy"});
    app.ok("PUT", "/v1/spaces/staging/livestatus", Some(live.clone())).await;
    app.ok("PATCH", "/v1/spaces/staging", Some(json!({"Annotations": {"code-freeze": "false"}}))).await;
    let approve = json!({"ChangeOrder": "base/bump"});
    // ann promoted staging, so she wrote the change there: her approval does not count
    as_user(&app, &ann, "POST", "/v1/spaces/staging/attestations", approve.clone()).await;
    as_user(&app, &bob, "POST", "/v1/spaces/staging/attestations", approve.clone()).await;
    let r = app.call("POST", PROMOTE, Some(&ann), Some(json!({}))).await;
    refused(&r, "prod", &[("approved", "staging")]);
    let msg = r.body["error"].as_str().unwrap();
    assert!(msg.contains("1 of 2"), "{msg}");
    // a revoked approval does not count
    let c = as_user(&app, &cat, "POST", "/v1/spaces/staging/attestations", approve.clone()).await;
    let slug = c["Slug"].as_str().unwrap();
    as_user(&app, &cat, "POST", &format!("/v1/spaces/staging/attestations/{slug}/revoke"), json!({})).await;
    refused(
        &app.call("POST", PROMOTE, Some(&ann), Some(json!({}))).await,
        "prod",
        &[("approved", "staging")],
    );
    // a second approver, but an unrevoked Fail blocks
    as_user(&app, &dan, "POST", "/v1/spaces/staging/attestations", approve.clone()).await;
    let no = as_user(
        &app,
        &eve,
        "POST",
        "/v1/spaces/staging/attestations",
        json!({"ChangeOrder": "base/bump", "Reject": true}),
    )
    .await;
    refused(
        &app.call("POST", PROMOTE, Some(&ann), Some(json!({}))).await,
        "prod",
        &[("approved", "staging")],
    );
    let slug = no["Slug"].as_str().unwrap();
    as_user(&app, &eve, "POST", &format!("/v1/spaces/staging/attestations/{slug}/revoke"), json!({})).await;
    let p = as_user(&app, &ann, "POST", PROMOTE, json!({})).await;
    assert_eq!(p["Stage"], "prod");
    let gates: Vec<&str> = p["Stages"][0]["Gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["Prerequisite"].as_str().unwrap())
        .collect();
    assert_eq!(
        gates,
        ["Promoted", "Released", "Healthy", "not-frozen", "approved"],
        "Promoted is checked first"
    );

    // publishing in prod needs release-approved from rel: a refused publish leaves no Release
    let r = app
        .admin("POST", "/v1/spaces/prod/releases", Some(json!({"Revision": "ChangeOrder:base/bump"})))
        .await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["error"].as_str().unwrap().contains("release-approved"), "{}", r.text);
    assert!(app.ok("GET", "/v1/spaces/prod/releases", None).await.as_array().unwrap().is_empty());
    as_user(&app, &pete, "POST", "/v1/spaces/prod/attestations", approve.clone()).await;
    let r = app
        .admin("POST", "/v1/spaces/prod/releases", Some(json!({"Revision": "ChangeOrder:base/bump"})))
        .await;
    assert_eq!(r.status, 422, "pete is not the named user: {}", r.text);
    as_user(&app, &rel, "POST", "/v1/spaces/prod/attestations", approve.clone()).await;
    app.ok("POST", "/v1/spaces/prod/releases", Some(json!({"Revision": "ChangeOrder:base/bump"}))).await;
    // Final: Released and Healthy in prod
    let co = app.ok("GET", "/v1/spaces/base/changeorders/bump", None).await;
    assert_eq!(co["Stage"], "prod");
    assert_eq!(co["State"], "Released");
    app.ok("PUT", "/v1/spaces/prod/livestatus", Some(live)).await;
    let co = app.ok("GET", "/v1/spaces/base/changeorders/bump", None).await;
    assert_eq!(co["Stage"], "Completed");
    assert!(co["PromotionOverrides"].as_array().unwrap().is_empty());
    let _ = ann_id;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_records_an_override() {
    let app = spawn_app("postgres").await;
    fleet(&app).await;
    let (_, ann) = user(&app, "ann", &["*=Edit"]).await;
    app.ok(
        "POST",
        "/v1/spaces/ops/changeworkflows",
        Some(json!({"Slug": "rollout", "Definition": changeflow::gates::EXAMPLE_WORKFLOW})),
    )
    .await;
    app.ok("PATCH", "/v1/spaces/base/units/web", Some(json!({"Data": WEB.replace("web:1.0", "web:2.0")})))
        .await;
    app.ok(
        "POST",
        "/v1/spaces/base/changeorders",
        Some(json!({"Slug": "bump", "ChangeWorkflow": "ops/rollout"})),
    )
    .await;
    app.ok("POST", PROMOTE, Some(json!({}))).await;
    let r = app.call("POST", PROMOTE, Some(&ann), Some(json!({"Force": true, "Reason": "hotfix"}))).await;
    assert_eq!(r.status, 403, "force needs Manage: {}", r.text);
    let r = app.admin("POST", PROMOTE, Some(json!({"Force": true}))).await;
    assert_eq!((r.status, r.body["field"].clone()), (400, json!("Reason")));
    let p = app.ok("POST", PROMOTE, Some(json!({"Force": true, "Reason": "hotfix for an outage"}))).await;
    assert_eq!(p["Stages"][0]["Forced"], true);
    let co = app.ok("GET", "/v1/spaces/base/changeorders/bump", None).await;
    let o = &co["PromotionOverrides"][0];
    assert_eq!(o["Stage"], "staging");
    assert_eq!(o["Reason"], "hotfix for an outage");
    assert!(o["FailedGates"][0].as_str().unwrap().contains("Released on dev"), "{o}");
    assert!(o["UserID"].is_string() && o["OverriddenAt"].is_string());
    // naming a later Stage never skips an earlier gate
    let r = app.admin("POST", PROMOTE, Some(json!({"TargetStage": "nope"}))).await;
    assert_eq!((r.status, r.body["field"].clone()), (400, json!("TargetStage")));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_workflows_are_refused_naming_stage_and_field() {
    let app = spawn_app("sqlite").await;
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "ops"}))).await;
    let stage = |name: &str, rest: &str| {
        format!("  - Name: {name}\n    WhereSpace: \"Labels.Stage = '{name}'\"\n{rest}")
    };
    let dev = stage("dev", "");
    let cases: Vec<(String, Option<&str>, &str)> = vec![
        (
            "Stages:\n  - Name: dev\n    WhereSpace: \"Labels.Stage ==\"\n".to_string(),
            Some("dev"),
            "WhereSpace",
        ),
        (
            "Stages:\n  - Name: dev\n    WhereSpace: \"Labels.Component = 'x'\"\n".to_string(),
            Some("dev"),
            "WhereSpace",
        ),
        (
            format!("Stages:\n{dev}{}", stage("prod", "    Prerequisites: [aproved]\n")),
            Some("prod"),
            "Prerequisites",
        ),
        (
            format!("Stages:\n{dev}CustomPrerequisites:\n  - Name: x\n    Expression: \"true\"\n"),
            None,
            "Expression",
        ),
        (
            format!("Stages:\n{dev}CustomPrerequisites:\n  - Name: x\n    Expression: \"cel:Space.(\"\n"),
            None,
            "Expression",
        ),
        (
            format!("Stages:\n{dev}CustomPrerequisites:\n  - Name: Released\n    Expression: \"cel:true\"\n"),
            None,
            "Name",
        ),
        (
            format!(
                "Stages:\n{dev}CustomPrerequisites:\n  - Name: x\n    Expression: \"cel:true\"\nAttestationPrerequisites:\n  - Name: x\n"
            ),
            None,
            "Name",
        ),
        (
            format!(
                "Stages:\n{}CustomPrerequisites:\n  - Name: x\n    Expression: \"cel:true\"\n",
                stage("dev", "    ReleasePrerequisites: [x]\n")
            ),
            Some("dev"),
            "ReleasePrerequisites",
        ),
        (
            format!(
                "Stages:\n{dev}AttestationPrerequisites:\n  - Name: a\n    FromGroupIDs: [9b2c0f3e-5d7a-4a61-8f0e-2b6d1c4e7a90]\n"
            ),
            None,
            "FromGroupIDs",
        ),
        (
            format!("Stages:\n{dev}AttestationPrerequisites:\n  - Name: a\n    DistinctGroups: true\n"),
            None,
            "DistinctGroups",
        ),
    ];
    for (i, (yaml, stage_name, field)) in cases.iter().enumerate() {
        let r = app
            .admin(
                "POST",
                "/v1/spaces/ops/changeworkflows",
                Some(json!({"Slug": format!("w{i}"), "Definition": yaml})),
            )
            .await;
        assert_eq!(r.status, 400, "case {i}: {}", r.text);
        let msg = r.body["error"].as_str().unwrap();
        assert!(r.body["field"].as_str().unwrap().contains(field), "case {i}: field {} in {}", field, r.text);
        if let Some(s) = stage_name {
            assert!(msg.contains(&format!("stage '{s}'")), "case {i}: {msg}");
        }
    }
    assert!(
        app.ok("GET", "/v1/spaces/ops/changeworkflows", None).await.as_array().unwrap().is_empty(),
        "nothing written"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_every_failing_gate_in_the_table_and_in_json() {
    let app = spawn_app("sqlite").await;
    fleet(&app).await;
    let file = app.dir.path().join("rollout.yaml");
    std::fs::write(&file, changeflow::gates::EXAMPLE_WORKFLOW).unwrap();
    app.ok("PATCH", "/v1/spaces/base/units/web", Some(json!({"Data": WEB.replace("web:1.0", "web:2.0")})))
        .await;
    let (url, token) = (app.url.clone(), app.token.clone());
    let run = move |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_changeflow"))
            .args(args)
            .env("CHANGEFLOW_SERVER", &url)
            .env("CHANGEFLOW_TOKEN", &token)
            .output()
            .unwrap()
    };
    let f = file.to_str().unwrap().to_string();
    let (table, json_out) = tokio::task::spawn_blocking(move || {
        let ok =
            |o: std::process::Output| assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        ok(run(&["changeworkflow", "create", "rollout", "--space", "ops", "--file", &f]));
        ok(run(&["changeorder", "create", "bump", "--space", "base", "--change-workflow", "ops/rollout"]));
        // Through the queue, followed to its end: dev.
        let dev = run(&["variant", "promote", "--change-order", "base/bump", "--wait"]);
        ok(dev.clone());
        assert!(
            String::from_utf8_lossy(&dev.stdout).contains("Done"),
            "{}",
            String::from_utf8_lossy(&dev.stdout)
        );
        // A dry run shows every gate at once and writes nothing.
        let table = run(&["variant", "promote", "--change-order", "base/bump", "--dry-run"]);
        let json_out = run(&["variant", "promote", "--change-order", "base/bump", "--dry-run", "-o", "json"]);
        // Queued without --wait: the ID at once; the staging task waits for its gates.
        let queued = run(&["variant", "promote", "--change-order", "base/bump", "-o", "json"]);
        ok(queued.clone());
        let p: Value = serde_json::from_slice(&queued.stdout).unwrap();
        let id = p["PromotionID"].as_str().unwrap().to_string();
        let mut waiting = Value::Null;
        for _ in 0..100 {
            let got = run(&["promotion", "get", &id, "-o", "json"]);
            waiting = serde_json::from_slice(&got.stdout).unwrap();
            if waiting["Counts"]["Blocked"] == 1 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let reason = waiting["Tasks"][0]["Reason"].as_str().unwrap_or_default().to_string();
        assert!(reason.contains("blocked by Released on dev"), "{waiting:#}");
        let listed = run(&["promotion", "get", &id]);
        assert!(String::from_utf8_lossy(&listed.stdout).contains("blocked by Released on dev"));
        ok(run(&["promotion", "cancel", &id, "--reason", "test over"]));
        (table, json_out)
    })
    .await
    .unwrap();
    assert!(!table.status.success());
    let err = String::from_utf8_lossy(&table.stderr);
    assert!(err.contains("failing gates") && err.contains("Released") && err.contains("dev"), "{err}");
    assert!(!json_out.status.success());
    let body: Value = serde_json::from_slice(&json_out.stdout).expect("a JSON refusal on stdout");
    let failing: Vec<&Value> =
        body["gates"].as_array().unwrap().iter().filter(|g| g["Satisfied"] == false).collect();
    assert_eq!(failing.len(), 1);
    assert_eq!(
        (failing[0]["Prerequisite"].as_str(), failing[0]["SpaceSlug"].as_str()),
        (Some("Released"), Some("dev"))
    );
    app.stop().await;
}
