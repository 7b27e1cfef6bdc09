//! `changeflow demo`: a throw-away server on the embedded store, a base Space with two Units,
//! three variants, two upstream edits, a local override in prod, and the upgrades that carry
//! the edits downstream while keeping the override. Every step goes through the HTTP API.

use super::client::Client;
use super::output::{self, Format};
use anyhow::{Result, ensure};
use serde_json::{Value, json};

const WEB_V1: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: web
          image: shop/web:1.0.0
          env:
            - name: LOG_LEVEL
              value: info
";

const SETTINGS: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
data:
  checkout: enabled
";

fn step(n: u32, what: &str) {
    eprintln!("[{n}/7] {what}");
}

/// Runs the demo end to end and prints where everything ended.
pub async fn run() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let server = crate::server::start(crate::server::ServeOptions {
        data_dir: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".into(),
        db: None,
    })
    .await?;
    let token = server.new_admin_token.clone().expect("a new store bootstraps an admin");
    eprintln!("demo server on {} (store: {})", server.url(), dir.path().join("changeflow.db").display());
    let c = Client::new(&server.url(), Some(token));

    step(1, "create base space shop-base with units web and settings");
    c.post("/v1/spaces", &json!({"Slug": "shop-base", "Labels": {"Component": "shop", "Stage": "base"}}))
        .await?;
    c.post("/v1/spaces/shop-base/units", &json!({"Slug": "web", "Data": WEB_V1})).await?;
    c.post("/v1/spaces/shop-base/units", &json!({"Slug": "settings", "Data": SETTINGS})).await?;

    step(2, "create variants shop-dev, shop-staging, shop-prod");
    for stage in ["dev", "staging", "prod"] {
        c.post(
            "/v1/spaces/shop-base/variants",
            &json!({"Slug": format!("shop-{stage}"), "Labels": {"Stage": stage}}),
        )
        .await?;
    }

    step(3, "prod scales web to 5 replicas and protects that path");
    let prod_web = WEB_V1.replace("replicas: 2", "replicas: 5");
    c.patch(
        "/v1/spaces/shop-prod/units/web",
        &json!({"Data": prod_web, "Protect": true, "ChangeDescription": "prod needs 5 replicas"}),
    )
    .await?;

    step(4, "edit the base twice: new image, then 3 replicas and a debug flag");
    let v2 = WEB_V1.replace("shop/web:1.0.0", "shop/web:1.1.0");
    c.patch("/v1/spaces/shop-base/units/web", &json!({"Data": v2, "ChangeDescription": "web 1.1.0"})).await?;
    let v3 = v2.replace("replicas: 2", "replicas: 3").replace("value: info", "value: debug");
    c.patch(
        "/v1/spaces/shop-base/units/web",
        &json!({"Data": v3, "ChangeDescription": "3 replicas, debug logs"}),
    )
    .await?;

    step(5, "promote every variant (upgrade each unit behind its upstream)");
    for stage in ["dev", "staging", "prod"] {
        let r = c.post(&format!("/v1/spaces/shop-{stage}/promote"), &json!({})).await?;
        eprintln!("  shop-{stage}:");
        for line in output::table(r.as_array().map(Vec::as_slice).unwrap_or(&[]), output::PROMOTED).lines() {
            eprintln!("    {line}");
        }
    }

    step(6, "check: prod kept its 5 replicas and lists the withheld change as a conflict");
    let conflicts = c.get("/v1/spaces/shop-prod/units/web/conflicts").await?;
    ensure!(
        conflicts.as_array().is_some_and(|a| a.iter().any(|x| x["Path"] == "spec.replicas")),
        "expected a conflict on spec.replicas"
    );
    output::print(&conflicts, Format::Table, output::CONFLICT);
    let prod_data = c.text("/v1/spaces/shop-prod/units/web/data").await?;
    ensure!(
        prod_data.contains("replicas: 5") && prod_data.contains("shop/web:1.1.0"),
        "prod should have 5 replicas and image 1.1.0"
    );

    step(7, "where everything ended (units whose Space has Stage = 'prod', then all)");
    let prod = c.get("/v1/units?where=Space.Labels.Stage%20%3D%20%27prod%27").await?;
    output::print(&prod, Format::Table, output::UNIT);
    println!();
    let all: Value = c.get("/v1/units").await?;
    let rows: Vec<Value> =
        futures::future::try_join_all(all.as_array().cloned().unwrap_or_default().into_iter().map(|u| {
            let c = &c;
            async move {
                let space =
                    c.get(&format!("/v1/spaces/{}", u["SpaceID"].as_str().unwrap_or_default())).await?;
                let data = c
                    .text(&format!(
                        "/v1/spaces/{}/units/{}/data",
                        space["Slug"].as_str().unwrap_or(""),
                        u["Slug"].as_str().unwrap_or("")
                    ))
                    .await?;
                let image =
                    data.lines().find_map(|l| l.trim().strip_prefix("image: ")).unwrap_or("-").to_string();
                let replicas =
                    data.lines().find_map(|l| l.trim().strip_prefix("replicas: ")).unwrap_or("-").to_string();
                anyhow::Ok(json!({"Space": space["Slug"], "Unit": u["Slug"], "Head": u["HeadRevisionNum"],
                              "Upstream": u["UpstreamRevisionNum"], "Image": image, "Replicas": replicas,
                              "Conflicts": u["Conflicts"].as_array().map_or(0, Vec::len)}))
            }
        }))
        .await?;
    print!(
        "{}",
        output::table(
            &rows,
            &[
                ("SPACE", "/Space"),
                ("UNIT", "/Unit"),
                ("HEAD", "/Head"),
                ("UPSTREAM", "/Upstream"),
                ("IMAGE", "/Image"),
                ("REPLICAS", "/Replicas"),
                ("CONFLICTS", "/Conflicts")
            ]
        )
    );
    server.stop().await?;
    eprintln!("demo finished: the base's two edits reached every variant; prod kept its protected replicas");
    Ok(())
}
