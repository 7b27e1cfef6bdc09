//! Deckhand conformance of `changeflow::layering`, and the `render` command.
//!
//! The corpus is read at test time from `../shared/conformance/layering/` next to the crate
//! (or the folder `CHANGEFLOW_LAYERING_CORPUS` names); it is never copied into this repository.
//! Each case folder holds `input.yaml`, `expected.yaml` and `case.yaml`; the comparison follows
//! the corpus README: rendered documents as an unordered set keyed by (schema, metadata.name),
//! only `schema`, `metadata` and `data` compared, values with their YAML types; or the error
//! class (and `reason` where given). Every case is also rendered in reversed and rotated input
//! order, which must not change the outcome.

use changeflow::layering::{RenderOptions, render};
use changeflow::model::parse_stream;
use serde_json::{Map, Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Cases deliberately not run: only cases flagged `deckhand_quirk` may appear, each with the
/// reason we differ from Deckhand. Empty: the engine reproduces all four flagged quirks.
const SKIPPED: &[(&str, &str)] = &[];

fn corpus_dir() -> PathBuf {
    match std::env::var_os("CHANGEFLOW_LAYERING_CORPUS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/conformance/layering")),
    }
}

fn read_yaml(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Identity of a rendered document.
fn key(doc: &Value) -> String {
    format!("{} {}", doc["schema"].as_str().unwrap_or("?"), doc["metadata"]["name"].as_str().unwrap_or("?"))
}

/// Only the compared sections of a rendered document.
fn comparable(doc: &Value) -> Value {
    let mut m = Map::new();
    for k in ["schema", "metadata", "data"] {
        if let Some(v) = doc.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    Value::Object(m)
}

fn short(v: Option<&Value>) -> String {
    let s = v.map_or("(absent)".to_string(), Value::to_string);
    if s.chars().count() > 80 { format!("{}…", s.chars().take(80).collect::<String>()) } else { s }
}

/// The first place where two values differ, as `path: expected X, got Y`.
fn first_difference(path: &str, want: &Value, got: &Value) -> Option<String> {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            keys.into_iter().find_map(|k| match (a.get(k), b.get(k)) {
                (Some(x), Some(y)) => first_difference(&format!("{path}.{k}"), x, y),
                (x, y) => Some(format!("{path}.{k}: expected {}, got {}", short(x), short(y))),
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(&format!("{path}[{i}]"), x, y)),
        _ if want == got => None,
        _ => Some(format!("{path}: expected {}, got {}", short(Some(want)), short(Some(got)))),
    }
}

/// Compares one rendering with `expected.yaml`; `Err` holds a diff summary.
fn compare(
    expected: &Value,
    got: Result<Vec<Value>, changeflow::layering::LayeringError>,
) -> Result<(), String> {
    match (expected.get("error"), got) {
        (Some(class), Err(e)) => {
            let reason = expected.get("reason").and_then(Value::as_str);
            if Some(e.class()) != class.as_str() || (reason.is_some() && reason != e.reason_code()) {
                return Err(format!(
                    "expected error {} ({}), got {} ({}): {e}",
                    short(Some(class)),
                    reason.unwrap_or("-"),
                    e.class(),
                    e.reason_code().unwrap_or("-")
                ));
            }
            Ok(())
        }
        (Some(class), Ok(docs)) => {
            Err(format!("expected error {}, got {} documents", short(Some(class)), docs.len()))
        }
        (None, Err(e)) => Err(format!("expected documents, got {e}")),
        (None, Ok(docs)) => {
            let want: Vec<Value> = expected["documents"].as_array().cloned().unwrap_or_default();
            let mut got: Vec<(String, Value)> = docs.iter().map(|d| (key(d), comparable(d))).collect();
            got.sort_by(|a, b| a.0.cmp(&b.0));
            if got.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err("two rendered documents share schema and name".into());
            }
            let mut problems = vec![];
            for w in &want {
                match got.iter().position(|(k, _)| *k == key(w)) {
                    None => problems.push(format!("missing {}", key(w))),
                    Some(i) => {
                        if let Some(d) = first_difference(&key(w), w, &got[i].1) {
                            problems.push(d);
                        }
                        got.remove(i);
                    }
                }
            }
            problems.extend(got.iter().map(|(k, _)| format!("unexpected {k}")));
            if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
        }
    }
}

fn run_case(dir: &Path) -> Result<(), String> {
    let case = read_yaml(&dir.join("case.yaml"))?;
    let expected = read_yaml(&dir.join("expected.yaml"))?;
    let text = std::fs::read_to_string(dir.join("input.yaml")).map_err(|e| e.to_string())?;
    let input = parse_stream(&text).map_err(|e| e.to_string())?;
    let opts = RenderOptions {
        validate: case["options"]["validate"].as_bool().unwrap_or(false),
        fail_on_missing_sub_src: case["options"]["fail_on_missing_sub_src"].as_bool().unwrap_or(true),
    };
    compare(&expected, render(&input, &opts))?;
    let mut reversed = input.clone();
    reversed.reverse();
    compare(&expected, render(&reversed, &opts)).map_err(|e| format!("in reversed input order: {e}"))?;
    let mut rotated = input;
    let half = rotated.len() / 2;
    rotated.rotate_left(half);
    compare(&expected, render(&rotated, &opts)).map_err(|e| format!("in rotated input order: {e}"))
}

#[test]
fn deckhand_conformance_corpus() {
    let dir = corpus_dir();
    if !dir.is_dir() {
        eprintln!("!!!!!!!! layering conformance DID NOT RUN: no corpus at {} !!!!!!!!", dir.display());
        eprintln!("!!!!!!!! set CHANGEFLOW_LAYERING_CORPUS to the case folder to run it !!!!!!!!");
        return;
    }
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("input.yaml").is_file())
        .collect();
    cases.sort();
    let (mut passed, mut skipped, mut failures) = (0, 0, vec![]);
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        if let Some((_, why)) = SKIPPED.iter().find(|(n, _)| *n == name) {
            let quirk = read_yaml(&case.join("case.yaml")).map(|c| c.get("deckhand_quirk").is_some());
            assert_eq!(quirk, Ok(true), "{name} is skipped ({why}) but is not flagged deckhand_quirk");
            skipped += 1;
            continue;
        }
        match run_case(case) {
            Ok(()) => passed += 1,
            Err(diff) => failures.push(format!("{name}: {diff}")),
        }
    }
    println!("layering conformance: {passed} passed, {} failed, {skipped} skipped", failures.len());
    for f in &failures {
        println!("  FAILED {f}");
    }
    assert!(!cases.is_empty(), "no case folders in {}", dir.display());
    assert!(failures.is_empty(), "{} conformance case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

// ---- the `render` command -------------------------------------------------------------------

/// The replacement seed's example: a global chart and a site replacement turning debug on.
const SEED: &str = r#"---
schema: deckhand/LayeringPolicy/v1
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
  storagePolicy: cleartext
  labels:
    selector: foo
  layeringDefinition:
    layer: global
data:
  debug: false
  chart_name: deckhand
  values:
    replicas: 2
---
schema: armada/Chart/v1
metadata:
  schema: metadata/Document/v1
  name: airship-deckhand
  storagePolicy: cleartext
  replacement: true
  layeringDefinition:
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
"#;

fn changeflow(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_changeflow"))
        .args(args)
        .env_remove("CHANGEFLOW_DATA_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default().as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

#[test]
fn render_prints_only_the_replacement_with_merged_data() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("seed.yaml");
    std::fs::write(&file, SEED).unwrap();
    let out = changeflow(&["render", file.to_str().unwrap(), "--validate"], None);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let docs = parse_stream(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let charts: Vec<&Value> = docs.iter().filter(|d| d["schema"] == "armada/Chart/v1").collect();
    assert_eq!(charts.len(), 1, "the replaced global document is not printed: {docs:?}");
    assert_eq!(charts[0]["metadata"]["layeringDefinition"]["layer"], "site");
    assert_eq!(charts[0]["metadata"]["replacement"], true);
    let merged = json!({"debug": true, "chart_name": "deckhand", "values": {"replicas": 2}});
    assert_eq!(charts[0]["data"], merged);
    assert_eq!(docs.len(), 2, "besides the chart only the LayeringPolicy passes through");

    let out = changeflow(&["render", "-", "-o", "json"], Some(SEED));
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let charts: Vec<&Value> =
        json.as_array().unwrap().iter().filter(|d| d["schema"] == "armada/Chart/v1").collect();
    assert_eq!(charts.len(), 1);
    assert_eq!(charts[0]["data"], merged);
}

#[test]
fn render_fails_naming_the_deckhand_error_class() {
    // The replacement without its global parent: nothing to replace.
    let orphan: Vec<&str> = SEED.split("---\n").filter(|d| !d.contains("layer: global")).collect();
    let out = changeflow(&["render"], Some(&orphan.join("---\n")));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("InvalidDocumentReplacement"), "{err}");
    assert!(err.contains("airship-deckhand") && err.contains("must select a parent"), "{err}");
    assert!(out.stdout.is_empty());
}
