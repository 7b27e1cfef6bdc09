//! `changeflow demo`: a throw-away server on the embedded store and the whole story through its
//! HTTP API: a base Space with variants in three Stages and two prod regions, a ChangeWorkflow
//! with a custom gate and two approvals, a ChangeOrder promoted dev → staging → prod, releases
//! to directories (as a GitOps checkout would receive them), live status, and where it all ended.

use super::client::Client;
use super::output::{self, Format};
use anyhow::{Result, ensure};
use serde_json::json;

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

const WORKFLOW: &str = r#"Stages:
  - Name: dev
    WhereSpace: "Labels.Stage = 'dev'"
  - Name: staging
    WhereSpace: "Labels.Stage = 'staging'"
    Prerequisites: [Validated, Released]
  - Name: prod
    WhereSpace: "Labels.Stage = 'prod'"
    Prerequisites: [Released, Healthy, not-frozen, approved]
Final:
  Prerequisites: [Released, Healthy]
CustomPrerequisites:
  - Name: not-frozen
    Expression: "cel:!('code-freeze' in Space.Annotations) || Space.Annotations['code-freeze'] != 'true'"
    Description: the space is not under a code freeze
AttestationPrerequisites:
  - Name: approved
    Count: 2
    Description: two approvals of the change in staging, by people who did not write it
"#;

const STEPS: u32 = 10;

fn step(n: u32, what: &str) {
    eprintln!("[{n}/{STEPS}] {what}");
}

async fn token_for(c: &Client, name: &str, grants: &[&str]) -> Result<String> {
    c.post("/v1/users", &json!({"Slug": name, "Grants": grants})).await?;
    let t = c.post(&format!("/v1/users/{name}/tokens"), &json!({})).await?;
    Ok(t["Token"].as_str().unwrap_or_default().to_string())
}

/// Publishes the change in a Space and reports it healthy, as a GitOps operator would.
async fn release_and_sync(c: &Client, space: &str) -> Result<()> {
    let r = c
        .post(&format!("/v1/spaces/{space}/releases"), &json!({"Revision": "ChangeOrder:shop-base/bump"}))
        .await?;
    c.put(
        &format!("/v1/spaces/{space}/livestatus"),
        &json!({"Sync": "Synced", "Operation": "Succeeded", "Health": "Healthy"}),
    )
    .await?;
    eprintln!("    {space}: release {} published and reported healthy", r["ReleaseNum"]);
    Ok(())
}

/// Runs the demo end to end and prints where everything ended.
pub async fn run() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut opts = crate::server::ServeOptions::embedded(dir.path().to_path_buf());
    // Blocked tasks re-check their gates every second or two while the story unfolds.
    opts.jobs.backoff_base = std::time::Duration::from_secs(1);
    opts.jobs.backoff_cap = std::time::Duration::from_secs(2);
    let server = crate::server::start(opts).await?;
    let admin = server.new_admin_token.clone().expect("a new store bootstraps an admin");
    eprintln!("demo server on {} (store: {})", server.url(), dir.path().join("changeflow.db").display());
    let c = Client::new(&server.url(), Some(admin.clone()));

    step(1, "base space shop-base (component shop) with units web and settings");
    c.post("/v1/spaces", &json!({"Slug": "platform"})).await?;
    c.post("/v1/spaces", &json!({"Slug": "shop-base", "Labels": {"Component": "shop", "Stage": "base"}}))
        .await?;
    c.post("/v1/spaces/shop-base/units", &json!({"Slug": "web", "Data": WEB_V1})).await?;
    c.post("/v1/spaces/shop-base/units", &json!({"Slug": "settings", "Data": SETTINGS})).await?;

    step(
        2,
        "variants: shop-dev → shop-staging → shop-prod-eu and shop-prod-us, each publishing to a directory",
    );
    let chain = [
        ("shop-base", "shop-dev", json!({"Stage": "dev"})),
        ("shop-dev", "shop-staging", json!({"Stage": "staging"})),
        ("shop-staging", "shop-prod-eu", json!({"Stage": "prod", "Region": "eu"})),
        ("shop-staging", "shop-prod-us", json!({"Stage": "prod", "Region": "us"})),
    ];
    for (from, to, labels) in &chain {
        c.post(&format!("/v1/spaces/{from}/variants"), &json!({"Slug": to, "Labels": labels})).await?;
        let path = dir.path().join("gitops");
        let target = json!({"Slug": "gitops", "ProviderType": "Directory", "Options": {"path": path.to_string_lossy()}});
        c.post(&format!("/v1/spaces/{to}/targets"), &target).await?;
        c.patch(&format!("/v1/spaces/{to}"), &json!({"ReleaseTarget": "gitops"})).await?;
    }

    step(3, "users: alice writes and promotes changes; bob and carol may approve in staging");
    let url = server.url();
    let alice = Client::new(&url, Some(token_for(&c, "alice", &["*=Edit"]).await?));
    let bob = Client::new(&url, Some(token_for(&c, "bob", &["*=View", "shop-staging=Approve"]).await?));
    let carol = Client::new(&url, Some(token_for(&c, "carol", &["*=View", "shop-staging=Approve"]).await?));

    step(4, "prod-eu scales web to 5 replicas and protects that path; the workflow is declared");
    let eu = WEB_V1.replace("replicas: 2", "replicas: 5");
    c.patch(
        "/v1/spaces/shop-prod-eu/units/web",
        &json!({"Data": eu, "Protect": true, "ChangeDescription": "eu needs 5"}),
    )
    .await?;
    c.post("/v1/spaces/platform/changeworkflows", &json!({"Slug": "rollout", "Definition": WORKFLOW}))
        .await?;

    step(5, "alice edits the base: web 1.1.0 with 3 replicas, and names the change bump");
    let v2 = WEB_V1.replace("shop/web:1.0.0", "shop/web:1.1.0").replace("replicas: 2", "replicas: 3");
    alice
        .patch(
            "/v1/spaces/shop-base/units/web",
            &json!({"Data": v2, "ChangeDescription": "web 1.1.0, 3 replicas"}),
        )
        .await?;
    let co = c
        .post(
            "/v1/spaces/shop-base/changeorders",
            &json!({"Slug": "bump", "ChangeWorkflow": "platform/rollout"}),
        )
        .await?;
    eprintln!(
        "    change order bump: {} spaces in scope, state {}",
        co["InScopeSpaceIDs"].as_array().map_or(0, Vec::len),
        co["State"]
    );

    // Every promotion goes through the queue: the request writes a Promotion and a task per
    // Space, workers apply them wave by wave and re-check the gates on every attempt.
    const PROMOTIONS: &str = "/v1/spaces/shop-base/changeorders/bump/promotions";
    let queued = |stage: &str| json!({"TargetStage": stage});
    step(6, "queue a promotion into dev (the first stage has no entry gates); release it");
    let p = alice.post(PROMOTIONS, &queued("dev")).await?;
    super::promotions::follow(&alice, Format::Table, p["PromotionID"].as_str().unwrap_or_default()).await?;
    release_and_sync(&c, "shop-dev").await?;

    step(7, "queue a promotion into staging (dev validated and released); release it");
    let p = alice.post(PROMOTIONS, &queued("staging")).await?;
    super::promotions::follow(&alice, Format::Table, p["PromotionID"].as_str().unwrap_or_default()).await?;
    release_and_sync(&c, "shop-staging").await?;

    step(
        8,
        "queue a promotion into prod: its tasks wait until two people who did not write the change approve",
    );
    let p = alice.post(PROMOTIONS, &queued("prod")).await?;
    let id = p["PromotionID"].as_str().unwrap_or_default().to_string();
    let mut waited = 0;
    let blocked = loop {
        let v = alice.get(&format!("/v1/promotions/{id}")).await?;
        if let Some(t) = v["Tasks"].as_array().into_iter().flatten().find(|t| t["State"] == "Blocked") {
            break t.clone();
        }
        ensure!(waited < 300, "prod should have been held by its gates: {v}");
        waited += 1;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    eprintln!(
        "    {}: {}",
        blocked["Space"].as_str().unwrap_or(""),
        blocked["Reason"].as_str().unwrap_or("")
    );
    for who in [&bob, &carol] {
        who.post(
            "/v1/spaces/shop-staging/attestations",
            &json!({"ChangeOrder": "shop-base/bump", "Note": "lgtm"}),
        )
        .await?;
    }
    eprintln!("    bob and carol approved the change as it stands in staging; the held tasks retry");

    step(9, "prod (both regions) takes the change once the gates open; release and report healthy");
    super::promotions::follow(&alice, Format::Table, &id).await?;
    for space in ["shop-prod-eu", "shop-prod-us"] {
        release_and_sync(&c, space).await?;
    }

    step(10, "where everything ended");
    let co = c.get("/v1/spaces/shop-base/changeorders/bump").await?;
    ensure!(co["Stage"] == "Completed", "the rollout should be complete, got {}", co["Stage"]);
    let eu_data = c.text("/v1/spaces/shop-prod-eu/units/web/data").await?;
    ensure!(
        eu_data.contains("replicas: 5") && eu_data.contains("shop/web:1.1.0"),
        "prod-eu keeps 5 replicas and takes 1.1.0"
    );
    let mut rows = vec![];
    for (_, space, _) in &chain {
        let data = c.text(&format!("/v1/spaces/{space}/units/web/data")).await?;
        let unit = c.get(&format!("/v1/spaces/{space}/units/web")).await?;
        let field = |key: &str| {
            data.lines().find_map(|l| l.trim().strip_prefix(key).map(str::to_string)).unwrap_or_default()
        };
        let on_disk = dir.path().join("gitops").join(space).join("web.yaml").exists();
        rows.push(json!({"Space": space, "Image": field("image: "), "Replicas": field("replicas: "),
                         "Head": unit["HeadRevisionNum"], "Released": unit["LastReleasedRevisionNum"],
                         "Conflicts": unit["Conflicts"].as_array().map_or(0, Vec::len), "OnDisk": on_disk}));
    }
    print!(
        "{}",
        output::table(
            &rows,
            &[
                ("SPACE", "/Space"),
                ("IMAGE", "/Image"),
                ("REPLICAS", "/Replicas"),
                ("HEAD", "/Head"),
                ("RELEASED", "/Released"),
                ("CONFLICTS", "/Conflicts"),
                ("GITOPS-FILE", "/OnDisk")
            ]
        )
    );
    println!();
    output::print(
        &json!([{"Slug": co["Slug"], "State": co["State"], "Stage": co["Stage"],
                 "Resolved": co["ResolvedSpaceIDs"].as_array().map_or(0, Vec::len),
                 "Released": co["ReleasedSpaceIDs"].as_array().map_or(0, Vec::len)}]),
        Format::Table,
        &[
            ("CHANGE-ORDER", "/Slug"),
            ("STATE", "/State"),
            ("STAGE", "/Stage"),
            ("RESOLVED", "/Resolved"),
            ("RELEASED", "/Released"),
        ],
    );
    server.stop().await?;
    eprintln!(
        "demo finished: bump went dev → staging → prod behind its gates; prod-eu kept its protected replicas"
    );
    Ok(())
}
