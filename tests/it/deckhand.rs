//! Deckhand/YAML Units: rendered together on every write (render errors become the Unit's
//! ValidationErrors, which the Validated gate reads) and shipped rendered in Releases.

use crate::helpers::spawn_app;
use serde_json::json;

const GLOBAL: &str = "schema: deckhand/LayeringPolicy/v1
metadata:
  schema: metadata/Control/v1
  name: layering-policy
data:
  layerOrder: [global, site]
---
schema: armada/Chart/v1
metadata:
  schema: metadata/Document/v1
  name: airship-deckhand
  labels:
    selector: foo
  layeringDefinition:
    abstract: false
    layer: global
data:
  debug: false
  image: deckhand:latest
  replicas: 1
";

const SITE: &str = "schema: armada/Chart/v1
metadata:
  schema: metadata/Document/v1
  name: airship-deckhand
  replacement: true
  layeringDefinition:
    abstract: false
    layer: site
    parentSelector:
      selector: foo
    actions:
      - method: merge
        path: .
      - method: replace
        path: .debug
data:
  debug: true
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_errors_become_validation_errors_and_releases_ship_rendered_documents() {
    let app = spawn_app("sqlite").await;
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "site-a"}))).await;
    let dh = |slug: &str, data: &str| json!({"Slug": slug, "Data": data, "ToolchainType": "Deckhand/YAML"});
    app.ok("POST", "/v1/spaces/site-a/units", Some(dh("global", GLOBAL))).await;
    // a replacement whose selector matches no parent
    let orphan = SITE.replace("selector: foo", "selector: nobody");
    let u = app.ok("POST", "/v1/spaces/site-a/units", Some(dh("site", &orphan))).await;
    let errors = u["ValidationErrors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{u}");
    assert!(errors[0]["Message"].as_str().unwrap().contains("InvalidDocumentReplacement"), "{u}");
    let global = app.ok("GET", "/v1/spaces/site-a/units/global", None).await;
    assert_eq!(global["ValidationErrors"], json!([]), "nothing else in the Space changes");
    assert_eq!(global["HeadRevisionNum"], 1);
    let revs = app.ok("GET", "/v1/spaces/site-a/units/site/revisions", None).await;
    assert_eq!(revs[0]["ValidationErrors"].as_array().unwrap().len(), 1, "the head revision carries it too");
    // fixing it clears the error
    let u = app.ok("PATCH", "/v1/spaces/site-a/units/site", Some(json!({"Data": SITE}))).await;
    assert_eq!(u["Unit"]["ValidationErrors"], json!([]));
    // a Release ships the rendered documents: only the replacement, with the merged data
    let dir = app.dir.path().join("out");
    let t = json!({"Slug": "out", "ProviderType": "Directory", "Options": {"path": dir.to_str().unwrap()}});
    app.ok("POST", "/v1/spaces/site-a/targets", Some(t)).await;
    app.ok("PATCH", "/v1/spaces/site-a", Some(json!({"ReleaseTarget": "out"}))).await;
    app.ok("POST", "/v1/spaces/site-a/releases", Some(json!({}))).await;
    let site = std::fs::read_to_string(dir.join("site-a").join("site.yaml")).unwrap();
    let global = std::fs::read_to_string(dir.join("site-a").join("global.yaml")).unwrap();
    assert!(
        site.contains("debug: true") && site.contains("deckhand:latest") && site.contains("replicas: 1"),
        "{site}"
    );
    assert!(!global.contains("airship-deckhand"), "the replaced parent does not ship: {global}");
    assert!(global.contains("LayeringPolicy"), "control documents pass through: {global}");
    app.stop().await;
}
