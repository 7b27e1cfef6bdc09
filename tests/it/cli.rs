//! The CLI as a new user runs it, against a real server.

use crate::api::WEB;
use crate::helpers::spawn_app;
use std::process::{Command, Output};

fn cf(url: &str, token: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_changeflow"))
        .args(args)
        .env("CHANGEFLOW_SERVER", url)
        .env("CHANGEFLOW_TOKEN", token)
        .env_remove("CHANGEFLOW_DATA_DIR")
        .output()
        .expect("binary runs")
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_user_walks_through_variants() {
    let app = spawn_app("sqlite").await;
    let (url, token) = (app.url.clone(), app.token.clone());
    let file = app.dir.path().join("web.yaml");
    std::fs::write(&file, WEB).unwrap();
    let prod_file = app.dir.path().join("web-prod.yaml");
    std::fs::write(&prod_file, WEB.replace("replicas: 2", "replicas: 7")).unwrap();
    let v2 = app.dir.path().join("web-v2.yaml");
    std::fs::write(&v2, WEB.replace("web:1.0", "web:1.1").replace("replicas: 2", "replicas: 3")).unwrap();
    let f = file.to_str().unwrap().to_string();
    let outs = tokio::task::spawn_blocking(move || {
        ok(cf(&url, &token, &["space", "create", "base", "--label", "Component=shop"]));
        ok(cf(&url, &token, &["unit", "create", "web", "--space", "base", "--file", &f]));
        for stage in ["dev", "prod"] {
            ok(cf(
                &url,
                &token,
                &["variant", "create", stage, "--from", "base", "--label", &format!("Stage={stage}")],
            ));
        }
        ok(cf(
            &url,
            &token,
            &["unit", "update", "web", "--space", "prod", "--file", prod_file.to_str().unwrap(), "--protect"],
        ));
        ok(cf(
            &url,
            &token,
            &[
                "unit",
                "update",
                "web",
                "--space",
                "base",
                "--file",
                v2.to_str().unwrap(),
                "--change-desc",
                "1.1",
            ],
        ));
        let upgraded =
            ok(cf(&url, &token, &["unit", "update", "web", "--space", "prod", "--upgrade", "-o", "json"]));
        let conflicts = ok(cf(&url, &token, &["unit", "conflicts", "web", "--space", "prod"]));
        let listed =
            ok(cf(&url, &token, &["unit", "list", "--where", "Space.Labels.Stage = 'prod'", "-o", "json"]));
        let table = ok(cf(&url, &token, &["space", "list"]));
        let bad = cf(&url, &token, &["unit", "list", "--where", "Slug = 'x' OR Slug = 'y'"]);
        let unauth = cf(&url, "cf_wrong", &["space", "list"]);
        (upgraded, conflicts, listed, table, bad, unauth)
    })
    .await
    .unwrap();
    let (upgraded, conflicts, listed, table, bad, unauth) = outs;
    let upgraded: serde_json::Value = serde_json::from_str(&upgraded).unwrap();
    assert_eq!(upgraded["Revisions"].as_array().unwrap().len(), 1);
    assert!(conflicts.contains("spec.replicas"), "{conflicts}");
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(table.starts_with("SLUG") && table.contains("base") && table.contains("prod"), "{table}");
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("OR") && err.contains("column"), "{err}");
    assert!(!unauth.status.success());
    assert!(String::from_utf8_lossy(&unauth.stderr).contains("401"));
    app.stop().await;
}

#[test]
fn help_teaches() {
    let out =
        Command::new(env!("CARGO_BIN_EXE_changeflow")).args(["unit", "update", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("--protect") && help.contains("--upgrade") && help.contains("--squash"), "{help}");
}

#[test]
fn the_demo_runs_the_whole_story() {
    let out =
        Command::new(env!("CARGO_BIN_EXE_changeflow")).arg("demo").env_remove("RUST_LOG").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("Completed") && stdout.contains("shop-prod-eu"), "{stdout}");
    assert!(
        stderr.contains("[10/10]") && stderr.contains("blocked by approved on shop-staging"),
        "progress and the gated prod: {stderr}"
    );
    // Through the queue: each promotion's table, prod's tasks attempted again once approved.
    assert!(stdout.contains("shop-prod-us  prod   1     Done"), "{stdout}");
}
