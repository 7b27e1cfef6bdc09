//! Pre-validation (`validate: true`): the structural checks Deckhand applies when documents are
//! ingested, written out by hand from its built-in schemas. Every document needs a `schema`
//! like `ns/Kind/v1` and `metadata` with `name` and a `schema` of `metadata/Document/v1` or
//! `metadata/Control/v1`; other top-level keys are tolerated. Document metadata is strict:
//! `storagePolicy` and `layeringDefinition.layer` are required, no unknown keys, `parentSelector`
//! and `actions` come together and are non-empty, substitutions are complete. Control metadata
//! needs string labels; LayeringPolicy and ValidationPolicy data have fixed shapes; no two
//! documents share (schema, layer, name). All problems are reported in one
//! `InvalidDocumentFormat`.

use super::document::DocView;
use super::error::{DocRef, FormatProblem, LayeringError};
use serde_json::{Map, Value};
use std::collections::HashSet;

struct Checker<'p> {
    doc: DocRef,
    problems: &'p mut Vec<FormatProblem>,
}

impl Checker<'_> {
    fn fail(&mut self, path: &str, reason: impl Into<String>) {
        self.problems.push(FormatProblem {
            document: self.doc.clone(),
            path: path.into(),
            reason: reason.into(),
        });
    }

    fn only_keys(&mut self, m: &Map<String, Value>, at: &str, allowed: &[&str]) {
        for k in m.keys().filter(|k| !allowed.contains(&k.as_str())) {
            self.fail(&format!("{at}.{k}"), "unknown key");
        }
    }

    fn typed(
        &mut self,
        m: &Map<String, Value>,
        at: &str,
        key: &str,
        required: bool,
        ok: fn(&Value) -> bool,
        what: &str,
    ) {
        match m.get(key) {
            None if required => self.fail(&format!("{at}.{key}"), "is required"),
            Some(v) if !ok(v) => self.fail(&format!("{at}.{key}"), format!("must be {what}")),
            _ => {}
        }
    }
}

/// `ns/Kind/v1`: two alphabetic parts and a `v<digits>` version.
fn schema_like(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    let alpha = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphabetic());
    parts.len() == 3 && alpha(parts[0]) && alpha(parts[1]) && version(parts[2])
}

fn version(p: &str) -> bool {
    p.strip_prefix('v').is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
}

fn is_str(v: &Value) -> bool {
    v.is_string()
}
fn is_bool(v: &Value) -> bool {
    v.is_boolean()
}
fn is_obj(v: &Value) -> bool {
    v.is_object()
}
fn is_int(v: &Value) -> bool {
    v.is_i64() || v.is_u64()
}

/// Checks every document; `Ok` when all pass.
pub(crate) fn check(docs: &[Value]) -> Result<(), LayeringError> {
    let mut problems = vec![];
    let mut seen = HashSet::new();
    for doc in docs {
        let view = DocView::of(doc);
        let doc_ref = view.as_ref().map(DocView::doc_ref).unwrap_or_default();
        let mut c = Checker { doc: doc_ref.clone(), problems: &mut problems };
        let Some(top) = doc.as_object() else {
            c.fail(".", "a document must be a mapping");
            continue;
        };
        if let Err(p) = &view {
            c.problems.push(p.clone());
        }
        c.typed(top, "", "schema", true, |v| v.as_str().is_some_and(schema_like), "a string like ns/Kind/v1");
        let Some(meta) = top.get("metadata").and_then(Value::as_object) else {
            c.fail("metadata", "is required and must be a mapping");
            continue;
        };
        c.typed(meta, "metadata", "name", true, is_str, "a string");
        let meta_schema = meta.get("schema").and_then(Value::as_str).unwrap_or_default();
        match meta_schema.rsplit_once('/') {
            Some(("metadata/Document", "v1")) => document_metadata(&mut c, meta),
            Some(("metadata/Control", "v1")) => control(&mut c, meta, top),
            _ => c.fail("metadata.schema", "must be metadata/Document/v1 or metadata/Control/v1"),
        }
        if !seen.insert(doc_ref.clone()) {
            c.fail(".", "duplicate document: another one has the same schema, layer and name");
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(LayeringError::InvalidDocumentFormat { problems }) }
}

fn document_metadata(c: &mut Checker<'_>, meta: &Map<String, Value>) {
    let at = "metadata";
    let keys =
        ["schema", "name", "labels", "replacement", "layeringDefinition", "substitutions", "storagePolicy"];
    c.only_keys(meta, at, &keys);
    c.typed(meta, at, "labels", false, is_obj, "a mapping");
    c.typed(meta, at, "replacement", false, is_bool, "a boolean");
    let policy = |v: &Value| matches!(v.as_str(), Some("cleartext" | "encrypted"));
    c.typed(meta, at, "storagePolicy", true, policy, "cleartext or encrypted");
    match meta.get("layeringDefinition") {
        None => c.fail("metadata.layeringDefinition", "is required"),
        Some(Value::Object(ld)) => layering_definition(c, ld),
        Some(_) => c.fail("metadata.layeringDefinition", "must be a mapping"),
    }
    match meta.get("substitutions") {
        None => {}
        Some(Value::Array(subs)) => {
            for (i, s) in subs.iter().enumerate() {
                substitution(c, s, &format!("metadata.substitutions[{i}]"));
            }
        }
        Some(_) => c.fail("metadata.substitutions", "must be a list"),
    }
}

fn layering_definition(c: &mut Checker<'_>, ld: &Map<String, Value>) {
    let at = "metadata.layeringDefinition";
    c.only_keys(ld, at, &["layer", "abstract", "parentSelector", "actions"]);
    c.typed(ld, at, "layer", true, is_str, "a string");
    c.typed(ld, at, "abstract", false, is_bool, "a boolean");
    let selector = |v: &Value| v.as_object().is_some_and(|m| !m.is_empty());
    c.typed(ld, at, "parentSelector", false, selector, "a non-empty mapping");
    match (ld.contains_key("parentSelector"), ld.contains_key("actions")) {
        (true, false) => c.fail(&format!("{at}.actions"), "is required with parentSelector"),
        (false, true) => c.fail(&format!("{at}.parentSelector"), "is required with actions"),
        _ => {}
    }
    match ld.get("actions") {
        None => {}
        Some(Value::Array(actions)) if !actions.is_empty() => {
            for (i, a) in actions.iter().enumerate() {
                let at = format!("{at}.actions[{i}]");
                let Some(a) = a.as_object() else {
                    c.fail(&at, "must be a mapping");
                    continue;
                };
                c.only_keys(a, &at, &["method", "path"]);
                let method = |v: &Value| matches!(v.as_str(), Some("merge" | "replace" | "delete"));
                c.typed(a, &at, "method", true, method, "merge, replace or delete");
                c.typed(a, &at, "path", true, is_str, "a string");
            }
        }
        Some(_) => c.fail(&format!("{at}.actions"), "must be a non-empty list"),
    }
}

fn substitution(c: &mut Checker<'_>, s: &Value, at: &str) {
    let Some(s) = s.as_object() else { return c.fail(at, "must be a mapping") };
    c.only_keys(s, at, &["src", "dest"]);
    match s.get("src") {
        None => c.fail(&format!("{at}.src"), "is required"),
        Some(Value::Object(src)) => {
            let at = format!("{at}.src");
            c.only_keys(src, &at, &["schema", "name", "path", "pattern", "match_group", "deepcopy"]);
            c.typed(
                src,
                &at,
                "schema",
                true,
                |v| v.as_str().is_some_and(schema_like),
                "a string like ns/Kind/v1",
            );
            c.typed(src, &at, "name", true, is_str, "a string");
            c.typed(src, &at, "path", true, is_str, "a string");
            c.typed(src, &at, "pattern", false, is_str, "a string");
            c.typed(src, &at, "match_group", false, is_int, "an integer");
            c.typed(src, &at, "deepcopy", false, is_bool, "a boolean");
        }
        Some(_) => c.fail(&format!("{at}.src"), "must be a mapping"),
    }
    match s.get("dest") {
        None => c.fail(&format!("{at}.dest"), "is required"),
        Some(Value::Array(ds)) if !ds.is_empty() => {
            for (j, d) in ds.iter().enumerate() {
                dest(c, d, &format!("{at}.dest[{j}]"));
            }
        }
        Some(d @ Value::Object(_)) => dest(c, d, &format!("{at}.dest")),
        Some(_) => c.fail(&format!("{at}.dest"), "must be a mapping or a non-empty list of them"),
    }
}

fn dest(c: &mut Checker<'_>, d: &Value, at: &str) {
    let Some(d) = d.as_object() else { return c.fail(at, "must be a mapping") };
    c.only_keys(d, at, &["path", "pattern", "recurse"]);
    c.typed(d, at, "path", true, is_str, "a string");
    c.typed(d, at, "pattern", false, is_str, "a string");
    let depth = |v: &Value| v.get("depth").is_some_and(|d| d.as_i64().is_some_and(|n| n >= -1));
    c.typed(d, at, "recurse", false, depth, "a mapping with an integer depth >= -1");
}

fn control(c: &mut Checker<'_>, meta: &Map<String, Value>, top: &Map<String, Value>) {
    let string_labels = |v: &Value| v.as_object().is_some_and(|m| m.values().all(Value::is_string));
    c.typed(meta, "metadata", "labels", false, string_labels, "a mapping of strings");
    let is_abstract =
        meta.get("layeringDefinition").and_then(|l| l.get("abstract")) == Some(&Value::Bool(true));
    let schema = top.get("schema").and_then(Value::as_str).unwrap_or_default();
    let data = top.get("data").unwrap_or(&Value::Null);
    match schema.rsplit_once('/') {
        _ if is_abstract => {}
        Some(("deckhand/LayeringPolicy", "v1")) => {
            let Some(d) = data.as_object() else { return c.fail("data", "must be a mapping") };
            c.only_keys(d, "data", &["layerOrder"]);
            let layers = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
            c.typed(d, "data", "layerOrder", true, layers, "a list of strings");
        }
        Some(("deckhand/ValidationPolicy", "v1")) => {
            let Some(d) = data.as_object() else { return c.fail("data", "must be a mapping") };
            c.only_keys(d, "data", &["validations"]);
            fn named(v: &Value) -> bool {
                v.as_object().is_some_and(|m| {
                    m.keys().all(|k| k == "name" || k == "expiresAfter")
                        && m.get("name")
                            .and_then(Value::as_str)
                            .is_some_and(|n| n.ends_with("-validation") || n.ends_with("-verification"))
                        && m.get("expiresAfter").is_none_or(Value::is_string)
                })
            }
            let list = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(named));
            c.typed(d, "data", "validations", true, list, "a list of {name: *-validation, expiresAfter}");
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(ld: Value) -> Value {
        json!({"schema": "a/Kind/v1", "metadata": {"schema": "metadata/Document/v1", "name": "x",
            "storagePolicy": "cleartext", "layeringDefinition": ld}, "data": null, "id": 7})
    }

    fn paths(docs: &[Value]) -> Vec<String> {
        match check(docs) {
            Ok(()) => vec![],
            Err(LayeringError::InvalidDocumentFormat { problems }) => {
                problems.into_iter().map(|p| p.path).collect()
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn well_formed_documents_pass() {
        let policy = json!({"schema": "deckhand/LayeringPolicy/v1",
            "metadata": {"schema": "metadata/Control/v1", "name": "p", "layeringDefinition": {"layer": "g"}},
            "data": {"layerOrder": ["global", "site"]}});
        let child = doc(json!({"layer": "site", "parentSelector": {"a": "b"},
            "actions": [{"method": "merge", "path": "."}]}));
        assert_eq!(paths(&[policy, doc(json!({"layer": "global"})), child]), Vec::<String>::new());
    }

    #[test]
    fn selector_and_actions_come_together() {
        let p = paths(&[doc(json!({"layer": "site", "parentSelector": {"a": "b"}}))]);
        assert_eq!(p, vec!["metadata.layeringDefinition.actions"]);
        let p = paths(&[doc(json!({"layer": "site", "parentSelector": {"a": "b"}, "actions": []}))]);
        assert_eq!(p, vec!["metadata.layeringDefinition.actions"]);
    }

    #[test]
    fn substitutions_must_be_complete() {
        let mut d = doc(json!({"layer": "site"}));
        d["metadata"]["substitutions"] = json!([{"src": {"schema": "a/B/v1", "path": "."}, "dest": {}}]);
        assert_eq!(
            paths(&[d]),
            vec!["metadata.substitutions[0].src.name", "metadata.substitutions[0].dest.path"]
        );
    }

    #[test]
    fn base_shape_and_duplicates() {
        let bad = json!({"schema": "not-a-schema", "metadata": {"schema": "metadata/Document/v1"}});
        let p = paths(&[bad]);
        assert!(p.contains(&".schema".to_string()) && p.contains(&"metadata.name".to_string()), "{p:?}");
        let d = doc(json!({"layer": "global"}));
        assert_eq!(paths(&[d.clone(), d]), vec!["."]);
        let policy = json!({"schema": "deckhand/LayeringPolicy/v1",
            "metadata": {"schema": "metadata/Control/v1", "name": "p"}, "data": {"layerOrder": "x"}});
        assert_eq!(paths(&[policy]), vec!["data.layerOrder"]);
    }
}
