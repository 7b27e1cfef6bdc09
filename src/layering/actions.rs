//! Layering actions: how a child's `data` is combined with the data its parent rendered.
//! Actions run in list order, each starting from the previous result and reading the child's
//! own (unrendered) data. `merge` deep-merges mappings (a child list or scalar replaces the
//! parent's; lists are never concatenated), `replace` puts the child's value at the path,
//! `delete` removes the path from the rendered-so-far data (`.` empties it). For merge and
//! replace the child's value must exist and not be null; for delete the parent side's.
//!
//! Two deliberate differences from Deckhand's code (research note, bugs 12.1 and 12.2): a
//! leading `data` segment is stripped only when it is a whole segment (`.database` stays), and
//! delete removes the addressed location rather than the first equal value.

use super::path::{self, Path, Seg};
use serde_json::{Map, Value};

/// Why an action could not be applied; the caller adds the document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ActionFailure {
    Unsupported(String),
    Missing { method: String, path: String, reason: String },
    Malformed(String),
}

/// Normalizes an action path: `$`/`.` prefixes, an implied leading `.`, and a leading `.data`
/// (or `$.data`) segment dropped because action paths may name the `data` section itself.
pub(crate) fn action_path(raw: &str) -> Result<Path, String> {
    let mut p = Path::parse(raw)?;
    let explicit = raw.starts_with(".data") || raw.starts_with("$.data");
    if explicit && p.0.first() == Some(&Seg::Key("data".into())) {
        p.0.remove(0);
    }
    Ok(p)
}

/// Deckhand's deep merge: keys of `src` win, mappings present on both sides merge recursively.
pub(crate) fn deep_merge(dst: &mut Map<String, Value>, src: &Map<String, Value>) {
    for (k, v) in src {
        match (dst.get_mut(k), v) {
            (Some(Value::Object(d)), Value::Object(s)) => deep_merge(d, s),
            _ => {
                dst.insert(k.clone(), v.clone());
            }
        }
    }
}

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// Applies one action (`{method, path}`) of a child whose own data is `child` to `current`.
pub(crate) fn apply(action: &Value, child: &Value, current: &mut Value) -> Result<(), ActionFailure> {
    let method = action.get("method").and_then(Value::as_str).unwrap_or_default();
    if !matches!(method, "merge" | "replace" | "delete") {
        let shown = action.get("method").map(|m| m.to_string()).unwrap_or_else(|| "(none)".into());
        return Err(ActionFailure::Unsupported(if method.is_empty() { shown } else { method.into() }));
    }
    let Some(raw) = action.get("path").and_then(Value::as_str) else {
        return Err(ActionFailure::Malformed(format!("{method} action without a string path")));
    };
    let path = action_path(raw).map_err(ActionFailure::Malformed)?;
    let missing = |reason: &str| ActionFailure::Missing {
        method: method.to_string(),
        path: raw.to_string(),
        reason: reason.to_string(),
    };
    match method {
        "delete" if path.is_root() => *current = Value::Object(Map::new()),
        "delete" => {
            if present(path::get(current, &path)).is_none() {
                return Err(missing("the path is missing (or null) in the data rendered so far"));
            }
            path::remove(current, &path);
        }
        _ => {
            let Some(from_child) = present(path::get(child, &path)) else {
                return Err(missing("the path is missing (or null) in the child's data"));
            };
            if method == "merge"
                && let (Some(Value::Object(into)), Value::Object(from)) =
                    (path::get_mut(current, &path), from_child)
            {
                deep_merge(into, from);
                return Ok(());
            }
            path::set(current, &path, from_child.clone())
                .map_err(|e| missing(&format!("cannot write: {e}")))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(actions: Value, parent: Value, child: Value) -> Result<Value, ActionFailure> {
        let mut cur = parent;
        for a in actions.as_array().unwrap() {
            apply(a, &child, &mut cur)?;
        }
        Ok(cur)
    }

    #[test]
    fn merge_is_deep_and_lists_are_replaced() {
        let parent = json!({"a": {"x": 1, "y": 2}, "c": 9, "l": [1, 2]});
        let child = json!({"a": {"x": 7, "z": 3}, "b": 4, "l": [3]});
        let all = run(json!([{"method": "merge", "path": "."}]), parent.clone(), child.clone()).unwrap();
        assert_eq!(all, json!({"a": {"x": 7, "y": 2, "z": 3}, "c": 9, "l": [3], "b": 4}));
        let sub = run(json!([{"method": "merge", "path": ".a"}]), parent, child).unwrap();
        assert_eq!(sub, json!({"a": {"x": 7, "y": 2, "z": 3}, "c": 9, "l": [1, 2]}));
    }

    #[test]
    fn list_index_merges_one_element() {
        let parent = json!({"a": ["test", {"x": 1, "y": 2}]});
        let child = json!({"a": [{}, {"z": 3}]});
        let r = run(json!([{"method": "merge", "path": ".data.a[1]"}]), parent, child).unwrap();
        assert_eq!(r, json!({"a": ["test", {"x": 1, "y": 2, "z": 3}]}));
    }

    #[test]
    fn replace_and_delete_in_sequence() {
        let parent = json!({"a": {"x": 1}, "b": 2});
        let child = json!({"a": {"z": 5}, "b": 4});
        let acts = json!([
            {"method": "replace", "path": "a"},
            {"method": "delete", "path": "$.data.b"},
            {"method": "merge", "path": ".b"}
        ]);
        assert_eq!(run(acts, parent, child).unwrap(), json!({"a": {"z": 5}, "b": 4}));
        let r = run(
            json!([{"method": "delete", "path": "."}, {"method": "delete", "path": "."}]),
            json!(3),
            json!(1),
        );
        assert_eq!(r.unwrap(), json!({}));
    }

    #[test]
    fn delete_removes_the_addressed_key_not_an_equal_value() {
        let r = run(json!([{"method": "delete", "path": ".b"}]), json!({"a": 5, "b": 5}), json!({}));
        assert_eq!(r.unwrap(), json!({"a": 5}));
    }

    #[test]
    fn data_prefix_is_a_whole_segment() {
        assert_eq!(action_path(".database").unwrap().to_string(), ".database");
        assert_eq!(action_path(".data").unwrap().to_string(), ".");
        assert_eq!(action_path("data.a").unwrap().to_string(), ".data.a");
    }

    #[test]
    fn missing_null_and_unknown_methods_fail() {
        let merge_c = json!([{"method": "merge", "path": ".c"}]);
        assert!(matches!(run(merge_c, json!({}), json!({"a": 1})), Err(ActionFailure::Missing { .. })));
        let null_child = json!([{"method": "replace", "path": ".a"}]);
        assert!(matches!(run(null_child, json!({}), json!({"a": null})), Err(ActionFailure::Missing { .. })));
        let del_null = json!([{"method": "delete", "path": ".a"}]);
        assert!(matches!(run(del_null, json!({"a": null}), json!({})), Err(ActionFailure::Missing { .. })));
        let foo = json!([{"method": "foo", "path": "."}]);
        assert_eq!(run(foo, json!({}), json!({})), Err(ActionFailure::Unsupported("foo".into())));
    }

    #[test]
    fn primitives_and_mixed_types_take_the_child() {
        let r = run(json!([{"method": "merge", "path": "."}]), json!({"a": 1}), json!("site"));
        assert_eq!(r.unwrap(), json!("site"));
        let r = run(json!([{"method": "merge", "path": "."}]), json!(false), json!(1));
        assert_eq!(r.unwrap(), json!(1));
    }
}
