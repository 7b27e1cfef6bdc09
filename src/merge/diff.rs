//! Structural diff of two document streams into a [`Patch`].

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::apply::ProtectedPath;
use super::path::{Path, Segment};

/// Identifies a document within a stream: `{apiVersion}/{kind}/{namespace}/{name}` for an
/// object with `kind` and `metadata.name` (missing apiVersion/namespace are empty strings),
/// otherwise `#{index}` (0-based position in the stream).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResourceKey(pub String);

impl ResourceKey {
    pub fn new(key: impl Into<String>) -> Self {
        ResourceKey(key.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for ResourceKey {
    fn from(key: &str) -> Self {
        ResourceKey(key.to_owned())
    }
}

impl From<String> for ResourceKey {
    fn from(key: String) -> Self {
        ResourceKey(key)
    }
}

/// The key of `doc`, found at position `index` of its stream.
pub fn resource_key(doc: &Value, index: usize) -> ResourceKey {
    let text = |pointer: &str| doc.pointer(pointer).and_then(Value::as_str);
    match (text("/kind"), text("/metadata/name")) {
        (Some(kind), Some(name)) => {
            let api_version = text("/apiVersion").unwrap_or("");
            let namespace = text("/metadata/namespace").unwrap_or("");
            ResourceKey(format!("{api_version}/{kind}/{namespace}/{name}"))
        }
        _ => ResourceKey(format!("#{index}")),
    }
}

/// The keys of a whole stream, made unique: the n-th (n >= 2) document with an
/// already-seen key gets `{key}#{n}` (e.g. a second `v1/ConfigMap/default/x` is
/// `v1/ConfigMap/default/x#2`). `diff` and `apply` identify documents by these.
pub fn stream_keys(docs: &[Value]) -> Vec<ResourceKey> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    docs.iter()
        .enumerate()
        .map(|(index, doc)| {
            let ResourceKey(key) = resource_key(doc, index);
            let count = seen.entry(key.clone()).or_insert(0);
            *count += 1;
            match *count {
                1 => ResourceKey(key),
                n => ResourceKey(format!("{key}#{n}")),
            }
        })
        .collect()
}

/// One change to a document stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "Op", rename_all_fields = "PascalCase")]
pub enum PatchOp {
    /// Set (or replace) the value at `path`, creating intermediate objects.
    Set { resource: ResourceKey, path: Path, value: Value },
    /// Remove the value at `path` (nothing to do if absent).
    Remove { resource: ResourceKey, path: Path },
    /// Add a document (appended), or replace the document that has this key.
    AddDocument { resource: ResourceKey, document: Value },
    /// Remove the document with this key.
    RemoveDocument { resource: ResourceKey },
}

impl PatchOp {
    pub fn resource(&self) -> &ResourceKey {
        match self {
            PatchOp::Set { resource, .. }
            | PatchOp::Remove { resource, .. }
            | PatchOp::AddDocument { resource, .. }
            | PatchOp::RemoveDocument { resource } => resource,
        }
    }

    /// The path the op writes: the root path for whole-document ops.
    pub fn path(&self) -> Path {
        match self {
            PatchOp::Set { path, .. } | PatchOp::Remove { path, .. } => path.clone(),
            PatchOp::AddDocument { .. } | PatchOp::RemoveDocument { .. } => Path::root(),
        }
    }
}

/// One line per op, for dry runs: `set <resource> <path> = <json>`.
impl fmt::Display for PatchOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatchOp::Set { resource, path, value } => write!(f, "set {resource} {path} = {value}"),
            PatchOp::Remove { resource, path } => write!(f, "remove {resource} {path}"),
            PatchOp::AddDocument { resource, .. } => write!(f, "add document {resource}"),
            PatchOp::RemoveDocument { resource } => write!(f, "remove document {resource}"),
        }
    }
}

/// An ordered list of ops.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Patch {
    pub ops: Vec<PatchOp>,
}

impl Patch {
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// The ops that turn `old` into `new`.
///
/// Documents are matched by [`stream_keys`]. Ops come in the document order of `new` (changes
/// inside a matched document, or `AddDocument`), then `RemoveDocument` for documents of `old`
/// that `new` lacks, in `old`'s order. Inside a document: objects are compared key by key
/// (changed and added keys in `new`'s key order, then removed keys); a change is reported at
/// the deepest differing path. Arrays of k8s-style named elements (every element an object
/// with a distinct string `name`) are compared by name with `?name=<name>` segments; other
/// arrays index by index when the lengths agree, else set whole (details at `diff_array`).
pub fn diff(old: &[Value], new: &[Value]) -> Patch {
    let old_keys = stream_keys(old);
    let new_keys = stream_keys(new);
    let mut ops = Vec::new();
    for (key, new_doc) in new_keys.iter().zip(new) {
        match old_keys.iter().position(|k| k == key) {
            Some(i) => {
                let mut changes = Vec::new();
                diff_value(&old[i], new_doc, &Path::root(), &mut changes);
                ops.extend(changes.into_iter().map(|(path, value)| match value {
                    Some(value) => PatchOp::Set { resource: key.clone(), path, value },
                    None => PatchOp::Remove { resource: key.clone(), path },
                }));
            }
            None => ops.push(PatchOp::AddDocument { resource: key.clone(), document: new_doc.clone() }),
        }
    }
    let removed = old_keys.iter().filter(|key| !new_keys.contains(key));
    ops.extend(removed.map(|key| PatchOp::RemoveDocument { resource: key.clone() }));
    Patch { ops }
}

/// The paths `diff(old, new)` writes (root path for added and removed documents): what
/// `unit update --protect` marks as protected.
pub fn changed_paths(old: &[Value], new: &[Value]) -> Vec<ProtectedPath> {
    diff(old, new).ops.iter().map(|op| ProtectedPath::new(op.resource().clone(), op.path())).collect()
}

/// `(path, Some(value))` = set, `(path, None)` = remove.
type Change = (Path, Option<Value>);

fn diff_value(old: &Value, new: &Value, path: &Path, out: &mut Vec<Change>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(old_map), Value::Object(new_map)) => {
            for (key, new_value) in new_map {
                let child = path.child(Segment::key(key.as_str()));
                match old_map.get(key) {
                    Some(old_value) => diff_value(old_value, new_value, &child, out),
                    None => out.push((child, Some(new_value.clone()))),
                }
            }
            for key in old_map.keys().filter(|key| !new_map.contains_key(*key)) {
                out.push((path.child(Segment::key(key.as_str())), None));
            }
        }
        (Value::Array(old_items), Value::Array(new_items)) => diff_array(old_items, new_items, path, out),
        _ => out.push((path.clone(), Some(new.clone()))),
    }
}

/// The `name`s of an array whose every element is an object with a string `name`, all
/// distinct (k8s containers, env, ports, volumes); `None` for any other array.
fn element_names(items: &[Value]) -> Option<Vec<&str>> {
    let names: Vec<&str> =
        items.iter().map(|item| item.get("name").and_then(Value::as_str)).collect::<Option<_>>()?;
    let distinct: HashSet<&str> = names.iter().copied().collect();
    (distinct.len() == names.len()).then_some(names)
}

/// Arrays of named elements (both sides, see [`element_names`]) are compared by name, with
/// `?name=<name>` path segments: removed elements become Removes, elements of both sides are
/// compared recursively, new elements become Sets that `apply` appends. That reproduces `new`
/// only when the common elements keep their relative order and all new elements come after
/// them; otherwise (reordering, insertion before an existing element) the whole array is Set.
/// Other arrays: same length → compared index by index; different lengths → whole array Set.
fn diff_array(old: &[Value], new: &[Value], path: &Path, out: &mut Vec<Change>) {
    if let (Some(old_names), Some(new_names)) = (element_names(old), element_names(new)) {
        let common: Vec<&str> = old_names.iter().copied().filter(|name| new_names.contains(name)).collect();
        if new_names[..common.len()] != common[..] {
            out.push((path.clone(), Some(Value::Array(new.to_vec()))));
            return;
        }
        for (name, new_item) in new_names.iter().zip(new) {
            let child = path.child(Segment::named(*name));
            match old_names.iter().position(|n| n == name) {
                Some(i) => diff_value(&old[i], new_item, &child, out),
                None => out.push((child, Some(new_item.clone()))),
            }
        }
        for name in old_names.iter().filter(|name| !new_names.contains(name)) {
            out.push((path.child(Segment::named(*name)), None));
        }
    } else if old.len() == new.len() {
        for (index, (old_item, new_item)) in old.iter().zip(new).enumerate() {
            diff_value(old_item, new_item, &path.child(Segment::Index(index)), out);
        }
    } else {
        out.push((path.clone(), Some(Value::Array(new.to_vec()))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(text: &str) -> ResourceKey {
        ResourceKey::from(text)
    }

    fn set(resource: &str, path: &str, value: Value) -> PatchOp {
        PatchOp::Set { resource: key(resource), path: Path::parse(path).unwrap(), value }
    }

    fn remove(resource: &str, path: &str) -> PatchOp {
        PatchOp::Remove { resource: key(resource), path: Path::parse(path).unwrap() }
    }

    #[test]
    fn resource_keys() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"}});
        assert_eq!(resource_key(&deployment, 3).to_string(), "apps/v1/Deployment/default/web");
        let bare = json!({"kind": "Namespace", "metadata": {"name": "prod"}});
        assert_eq!(resource_key(&bare, 0).as_str(), "/Namespace//prod");
        assert_eq!(resource_key(&json!({"kind": "X"}), 2).as_str(), "#2");
        assert_eq!(resource_key(&json!([1]), 0).as_str(), "#0");
        let twice = [bare.clone(), json!(null), bare];
        let keys: Vec<String> = stream_keys(&twice).into_iter().map(|k| k.0).collect();
        assert_eq!(keys, ["/Namespace//prod", "#1", "/Namespace//prod#2"]);
    }

    #[test]
    fn identical_streams_have_an_empty_diff() {
        let docs = [json!({"kind": "A", "metadata": {"name": "a"}, "x": [1, {"y": 2}]}), json!(3)];
        assert!(diff(&docs, &docs).is_empty());
        assert!(diff(&[], &[]).is_empty());
    }

    #[test]
    fn object_changes_at_the_deepest_path() {
        let old = [json!({"a": {"b": 1, "c": 2, "gone": true}, "s": "x"})];
        let new = [json!({"a": {"b": 1, "c": 3, "new": {"d": 4}}, "s": {"now": "object"}})];
        assert_eq!(
            diff(&old, &new).ops,
            [
                set("#0", "a.c", json!(3)),
                set("#0", "a.new", json!({"d": 4})),
                remove("#0", "a.gone"),
                set("#0", "s", json!({"now": "object"})),
            ]
        );
    }

    #[test]
    fn arrays_positional_or_whole() {
        let old = [json!({"same": [1, 2, 3], "grow": [1], "objs": [{"a": 1}, {"a": 2}]})];
        let new = [json!({"same": [1, 5, 3], "grow": [1, 2], "objs": [{"a": 1}, {"a": 3}]})];
        assert_eq!(
            diff(&old, &new).ops,
            [
                set("#0", "same.1", json!(5)),
                set("#0", "grow", json!([1, 2])),
                set("#0", "objs.1.a", json!(3)),
            ]
        );
    }

    #[test]
    fn named_arrays_match_by_name() {
        let old = [json!({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"},
            {"name": "C", "value": "3"}]})];
        let new = [json!({"env": [{"name": "A", "value": "1"}, {"name": "C", "value": "9"},
            {"name": "D", "value": "4"}]})];
        assert_eq!(
            diff(&old, &new).ops,
            [
                set("#0", "env.?name=C.value", json!("9")),
                set("#0", "env.?name=D", json!({"name": "D", "value": "4"})),
                remove("#0", "env.?name=B"),
            ]
        );
    }

    #[test]
    fn named_arrays_reordered_or_inserted_before_are_set_whole() {
        let old = [json!({"env": [{"name": "A"}, {"name": "B"}]})];
        for new_env in [json!([{"name": "B"}, {"name": "A"}]), json!([{"name": "Z"}, {"name": "A"}])] {
            let new = [json!({ "env": new_env })];
            assert_eq!(diff(&old, &new).ops, [set("#0", "env", new_env.clone())]);
        }
    }

    #[test]
    fn duplicate_names_are_not_a_named_array() {
        let old = [json!({"l": [{"name": "A", "v": 1}, {"name": "A", "v": 2}]})];
        let new = [json!({"l": [{"name": "A", "v": 1}, {"name": "A", "v": 3}]})];
        assert_eq!(diff(&old, &new).ops, [set("#0", "l.1.v", json!(3))]);
    }

    #[test]
    fn documents_added_and_removed() {
        let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let b = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}});
        let c = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}});
        let patch = diff(&[a.clone(), b.clone()], &[c.clone(), a]);
        assert_eq!(
            patch.ops,
            [
                PatchOp::AddDocument { resource: key("v1/Secret//c"), document: c },
                PatchOp::RemoveDocument { resource: key("v1/ConfigMap//b") },
            ]
        );
        let paths: Vec<String> =
            changed_paths(&[b], &[]).iter().map(|p| format!("{} {}", p.resource, p.path)).collect();
        assert_eq!(paths, ["v1/ConfigMap//b "]);
    }

    #[test]
    fn changed_paths_lists_every_written_path() {
        let old = [json!({"spec": {"replicas": 2, "paused": true}})];
        let new = [json!({"spec": {"replicas": 5}}), json!("extra")];
        let paths: Vec<String> =
            changed_paths(&old, &new).iter().map(|p| format!("{} {}", p.resource, p.path)).collect();
        assert_eq!(paths, ["#0 spec.replicas", "#0 spec.paused", "#1 "]);
    }

    #[test]
    fn patch_serde_shape() {
        let patch = Patch { ops: vec![set("#0", "a.?name=x", json!({"name": "x"})), remove("#0", "b")] };
        let json = serde_json::to_value(&patch).unwrap();
        assert_eq!(
            json,
            json!({"Ops": [
                {"Op": "Set", "Resource": "#0", "Path": "a.?name=x", "Value": {"name": "x"}},
                {"Op": "Remove", "Resource": "#0", "Path": "b"},
            ]})
        );
        assert_eq!(serde_json::from_value::<Patch>(json).unwrap(), patch);
        assert_eq!(patch.ops[1].to_string(), "remove #0 b");
    }
}
