//! Applying a [`Patch`] to a downstream stream, honouring protected paths.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::diff::{Patch, PatchOp, ResourceKey, stream_keys};
use super::path::{MergeError, Path, get_path, remove_path, resolve_in, set_path};

/// Conflict reason: the op would have overwritten a protected path.
pub const REASON_PROTECTED_PATH: &str = "ProtectedPath";
/// Conflict reason: a Set/Remove into a document the downstream does not have.
pub const REASON_MISSING_RESOURCE: &str = "MissingResource";
/// Conflict reason: the op's path cannot be written in the downstream document (a missing
/// array element in the middle of the path, a scalar where a container is needed, ...).
pub const REASON_UNRESOLVED_PATH: &str = "UnresolvedPath";

/// A local override a merge must not overwrite. JSON (strings, as a Unit stores them):
/// `{"Resource": "apps/v1/Deployment/default/web", "Path": "spec.replicas"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProtectedPath {
    pub resource: ResourceKey,
    pub path: Path,
}

impl ProtectedPath {
    pub fn new(resource: impl Into<ResourceKey>, path: Path) -> Self {
        ProtectedPath { resource: resource.into(), path }
    }

    /// From a resource key and the text form of a path; the error names the path.
    pub fn parse(resource: &str, path: &str) -> Result<Self, MergeError> {
        Ok(ProtectedPath::new(resource, Path::parse(path)?))
    }
}

/// A change the merge withheld (never silently dropped). The caller adds revision numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Conflict {
    pub resource: String,
    /// Text form of the path; empty for a whole document.
    pub path: String,
    /// One of the `REASON_*` constants.
    pub reason: String,
    /// What the merge withheld; `None` for removals.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub upstream_value: Option<Value>,
    /// What the downstream keeps; `None` when it has nothing there.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub downstream_value: Option<Value>,
}

/// A present field is `Some`, even when it is `null` (absent fields are `None` by default).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// Result of [`apply`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Applied {
    pub documents: Vec<Value>,
    pub conflicts: Vec<Conflict>,
    /// `documents` differ from the base.
    pub changed: bool,
}

struct Merge<'a> {
    resource: &'a ResourceKey,
    /// The protected paths of `resource`.
    guards: Vec<&'a Path>,
    conflicts: &'a mut Vec<Conflict>,
}

impl Merge<'_> {
    fn conflict(&mut self, path: &Path, reason: &str, up: Option<Value>, down: Option<Value>) {
        self.conflicts.push(Conflict {
            resource: self.resource.to_string(),
            path: path.to_string(),
            reason: reason.to_owned(),
            upstream_value: up,
            downstream_value: down,
        });
    }

    /// Set (`Some`) or remove (`None`) the value at `path` in `doc`, honouring the guards.
    fn change(&mut self, doc: &mut Value, path: &Path, new: Option<&Value>) {
        let current = get_path(doc, path);
        if current == new {
            return;
        }
        let upstream = new.cloned();
        let downstream = current.cloned();
        // Compare with `?field=value` segments resolved in the downstream document, so that
        // a guard written with indices still covers a path written by name, and vice versa.
        let target = resolve_in(doc, path);
        let guards: Vec<(&Path, Path)> = self.guards.iter().map(|g| (*g, resolve_in(doc, g))).collect();
        if guards.iter().any(|(_, g)| g.is_prefix_of(&target)) {
            return self.conflict(path, REASON_PROTECTED_PATH, upstream, downstream);
        }
        if guards.is_empty() {
            if write(doc, path, new).is_err() {
                self.conflict(path, REASON_UNRESOLVED_PATH, upstream, downstream);
            }
            return;
        }
        // Guards strictly below `path`, outermost first, nested ones dropped.
        let mut inner: Vec<&(&Path, Path)> = guards.iter().filter(|(_, g)| target.is_prefix_of(g)).collect();
        inner.sort_by_key(|(_, g)| g.segments().len());
        let mut kept: Vec<&(&Path, Path)> = Vec::new();
        for guard in inner {
            if !kept.iter().any(|k| k.1.is_prefix_of(&guard.1)) {
                kept.push(guard);
            }
        }
        let mut next = doc.clone();
        if write(&mut next, path, new).is_err() {
            return self.conflict(path, REASON_UNRESOLVED_PATH, upstream, downstream);
        }
        // Apply the op, then put each protected descendant's downstream value (or absence)
        // back. If that is impossible in the new shape, withhold the whole op.
        let mut pending = Vec::new();
        for (guard, _) in kept {
            let relative = Path::new(guard.segments()[path.segments().len()..].to_vec());
            let guard_upstream = new.and_then(|v| get_path(v, &relative)).cloned();
            let guard_downstream = get_path(doc, guard).cloned();
            if restore(&mut next, guard, guard_downstream.as_ref()).is_err() {
                return self.conflict(path, REASON_PROTECTED_PATH, upstream, downstream);
            }
            if guard_upstream != guard_downstream {
                pending.push((*guard, guard_upstream, guard_downstream));
            }
        }
        // Every protected path must still read what it read before: a write elsewhere can
        // shift, rename or shadow an array element a protected path selects.
        if self.guards.iter().any(|g| get_path(&next, g) != get_path(doc, g)) {
            return self.conflict(path, REASON_PROTECTED_PATH, upstream, downstream);
        }
        *doc = next;
        for (guard, up, down) in pending {
            self.conflict(guard, REASON_PROTECTED_PATH, up, down);
        }
    }

    /// AddDocument of a key the downstream lacks: protected paths of that key keep their
    /// downstream state, which is absence.
    fn add(&mut self, mut document: Value) -> Option<Value> {
        if self.guards.iter().any(|g| g.is_root()) {
            self.conflict(&Path::root(), REASON_PROTECTED_PATH, Some(document), None);
            return None;
        }
        let mut guards = self.guards.clone();
        guards.sort_by_key(|g| g.segments().len());
        for guard in guards {
            if let Ok(Some(withheld)) = remove_path(&mut document, guard) {
                self.conflict(guard, REASON_PROTECTED_PATH, Some(withheld), None);
            }
        }
        Some(document)
    }
}

/// Like `write`, but absence is restored by removing every element a `?field=value`
/// path selects (the new value may hold several).
fn restore(doc: &mut Value, path: &Path, value: Option<&Value>) -> Result<(), MergeError> {
    if value.is_some() {
        return write(doc, path, value);
    }
    while remove_path(doc, path)?.is_some() {}
    Ok(())
}

fn write(doc: &mut Value, path: &Path, value: Option<&Value>) -> Result<(), MergeError> {
    match value {
        Some(value) => set_path(doc, path, value.clone()),
        None => remove_path(doc, path).map(drop),
    }
}

/// Applies `patch` to the downstream stream `base`, withholding what `protected` forbids.
///
/// Documents are identified by [`stream_keys`] of `base` (computed once, before any op).
/// * `Set`/`Remove`: a Set of the current value, or a Remove of a missing path, is a no-op
///   (no conflict even if protected). An op whose path equals or lies under a protected path
///   is withheld with a `ProtectedPath` conflict at the op's path (paths are compared with
///   `?field=value` segments resolved in the downstream document). So is any op after which
///   some protected path would read a different value (e.g. removing an array element shifts
///   a protected path written by index; renaming an element changes what `?name=` selects). An op whose
///   path is an ancestor of protected paths is applied, then each protected descendant gets its
///   downstream value back (or stays absent), with a `ProtectedPath` conflict at the protected
///   path if the upstream value there differs; if the new shape cannot hold the downstream
///   value, the whole op is withheld instead. A document the downstream lacks gives a
///   `MissingResource` conflict; a path that cannot be written an `UnresolvedPath` conflict.
/// * `AddDocument`: an existing key is replaced as a root Set (so protected paths inside it
///   survive as above); a new key is appended (in patch order), minus any protected paths of
///   that key (their downstream state is absence), unless the root is protected.
/// * `RemoveDocument`: a document with any protected path is kept, with a `ProtectedPath`
///   conflict at the root; a missing document is a no-op.
pub fn apply(base: &[Value], patch: &Patch, protected: &[ProtectedPath]) -> Applied {
    let mut slots: Vec<(ResourceKey, Value)> =
        stream_keys(base).into_iter().zip(base.iter().cloned()).collect();
    let mut conflicts = Vec::new();
    for op in &patch.ops {
        let resource = op.resource();
        let mut merge = Merge {
            resource,
            guards: protected.iter().filter(|p| &p.resource == resource).map(|p| &p.path).collect(),
            conflicts: &mut conflicts,
        };
        let slot = slots.iter().position(|(key, _)| key == resource);
        match (op, slot) {
            (PatchOp::Set { path, value, .. }, Some(i)) => merge.change(&mut slots[i].1, path, Some(value)),
            (PatchOp::Remove { path, .. }, Some(i)) => merge.change(&mut slots[i].1, path, None),
            (PatchOp::Set { path, value, .. }, None) => {
                merge.conflict(path, REASON_MISSING_RESOURCE, Some(value.clone()), None)
            }
            (PatchOp::Remove { path, .. }, None) => merge.conflict(path, REASON_MISSING_RESOURCE, None, None),
            (PatchOp::AddDocument { document, .. }, Some(i)) => {
                merge.change(&mut slots[i].1, &Path::root(), Some(document))
            }
            (PatchOp::AddDocument { document, .. }, None) => {
                if let Some(document) = merge.add(document.clone()) {
                    slots.push((resource.clone(), document));
                }
            }
            (PatchOp::RemoveDocument { .. }, Some(i)) => {
                if merge.guards.is_empty() {
                    slots.remove(i);
                } else {
                    let kept = slots[i].1.clone();
                    merge.conflict(&Path::root(), REASON_PROTECTED_PATH, None, Some(kept));
                }
            }
            (PatchOp::RemoveDocument { .. }, None) => {}
        }
    }
    let documents: Vec<Value> = slots.into_iter().map(|(_, doc)| doc).collect();
    let changed = documents != base;
    Applied { documents, conflicts, changed }
}

#[cfg(test)]
mod tests {
    use super::super::diff::{changed_paths, diff};
    use super::super::path::Segment;
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, json};

    fn p(text: &str) -> Path {
        Path::parse(text).unwrap()
    }

    fn guard(resource: &str, path: &str) -> ProtectedPath {
        ProtectedPath::parse(resource, path).unwrap()
    }

    fn set(resource: &str, path: &str, value: Value) -> PatchOp {
        PatchOp::Set { resource: resource.into(), path: p(path), value }
    }

    fn patch(ops: Vec<PatchOp>) -> Patch {
        Patch { ops }
    }

    const WEB: &str = "apps/v1/Deployment/default/web";

    fn deployment(replicas: u64, image: &str, env: Value) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "template": {"spec": {"containers": [
                    {"name": "web", "image": image, "env": env}
                ]}}
            }
        })
    }

    #[test]
    fn realistic_k8s_upgrade_keeps_local_overrides() {
        let env = json!([{"name": "LOG_LEVEL", "value": "info"}]);
        let local_env = json!([{"name": "LOG_LEVEL", "value": "info"}, {"name": "REGION", "value": "eu"}]);
        let base = [deployment(2, "nginx:1.0", env.clone())];
        let upstream = [deployment(3, "nginx:1.1", env)];
        let prod = [deployment(5, "nginx:1.0", local_env.clone())];
        // Only the replicas are protected; the extra env var survives because the upstream
        // change does not touch the env list. Protecting it changes nothing here.
        let extra = guard(WEB, "spec.template.spec.containers.?name=web.env.?name=REGION");
        for protected in [vec![guard(WEB, "spec.replicas")], vec![guard(WEB, "spec.replicas"), extra]] {
            let applied = apply(&prod, &diff(&base, &upstream), &protected);
            assert_eq!(applied.documents, [deployment(5, "nginx:1.1", local_env.clone())]);
            assert!(applied.changed);
            assert_eq!(
                applied.conflicts,
                [Conflict {
                    resource: WEB.into(),
                    path: "spec.replicas".into(),
                    reason: REASON_PROTECTED_PATH.into(),
                    upstream_value: Some(json!(3)),
                    downstream_value: Some(json!(5)),
                }]
            );
        }
    }

    #[test]
    fn named_elements_resolve_in_a_reordered_downstream() {
        let containers =
            |a: &str, b: &str| json!({"c": [{"name": "a", "image": a}, {"name": "b", "image": b}]});
        let base = [containers("a1", "b1")];
        let upstream = [containers("a2", "b1")];
        let downstream =
            [json!({"c": [{"name": "side"}, {"name": "b", "image": "b1"}, {"name": "a", "image": "a1"}]})];
        let applied = apply(&downstream, &diff(&base, &upstream), &[]);
        assert_eq!(
            applied.documents,
            [json!({"c": [{"name": "side"}, {"name": "b", "image": "b1"}, {"name": "a", "image": "a2"}]})]
        );
        // An index-written guard covers the same element.
        let applied = apply(&downstream, &diff(&base, &upstream), &[guard("#0", "c.2")]);
        assert!(!applied.changed);
        assert_eq!(applied.conflicts[0].path, "c.?name=a.image");
    }

    #[test]
    fn empty_patch_changes_nothing() {
        let docs = [deployment(2, "x", json!([])), json!("scalar")];
        let applied = apply(&docs, &Patch::default(), &[guard(WEB, "")]);
        assert_eq!(applied.documents, docs);
        assert!(!applied.changed && applied.conflicts.is_empty());
    }

    #[test]
    fn setting_the_current_value_is_a_no_op_even_when_protected() {
        let docs = [json!({"a": 1})];
        let applied = apply(&docs, &patch(vec![set("#0", "a", json!(1))]), &[guard("#0", "a")]);
        assert!(!applied.changed && applied.conflicts.is_empty());
    }

    #[test]
    fn op_under_a_protected_path_is_withheld() {
        let docs = [json!({"spec": {"replicas": {"min": 1}}})];
        let ops = vec![set("#0", "spec.replicas.min", json!(2)), set("#0", "spec.paused", json!(true))];
        let applied = apply(&docs, &patch(ops), &[guard("#0", "spec.replicas")]);
        assert_eq!(applied.documents, [json!({"spec": {"replicas": {"min": 1}, "paused": true}})]);
        assert_eq!(applied.conflicts.len(), 1);
        assert_eq!(applied.conflicts[0].path, "spec.replicas.min");
        assert_eq!(applied.conflicts[0].downstream_value, Some(json!(1)));
    }

    #[test]
    fn op_above_a_protected_path_keeps_the_protected_value() {
        let docs = [json!({"spec": {"replicas": 5, "paused": false, "gone": 1}})];
        let ops = vec![set("#0", "spec", json!({"replicas": 3, "paused": true}))];
        let applied = apply(&docs, &patch(ops), &[guard("#0", "spec.replicas"), guard("#0", "spec.gone")]);
        assert_eq!(applied.documents, [json!({"spec": {"replicas": 5, "paused": true, "gone": 1}})]);
        let paths: Vec<_> =
            applied.conflicts.iter().map(|c| (c.path.as_str(), c.upstream_value.clone())).collect();
        assert_eq!(paths, [("spec.replicas", Some(json!(3))), ("spec.gone", None)]);
        // The upstream agreeing at the protected path gives no conflict.
        let ops = vec![set("#0", "spec", json!({"replicas": 5, "paused": true}))];
        let applied =
            apply(&[json!({"spec": {"replicas": 5}})], &patch(ops), &[guard("#0", "spec.replicas")]);
        assert_eq!(applied.documents, [json!({"spec": {"replicas": 5, "paused": true}})]);
        assert!(applied.conflicts.is_empty());
    }

    #[test]
    fn ancestor_op_that_cannot_keep_the_protected_value_is_withheld() {
        let docs = [json!({"c": [{"name": "web", "image": "local"}]})];
        let ops = vec![set("#0", "c", json!([{"name": "other"}]))];
        let applied = apply(&docs, &patch(ops), &[guard("#0", "c.?name=web.image")]);
        assert!(!applied.changed);
        assert_eq!(applied.conflicts.len(), 1);
        assert_eq!(applied.conflicts[0].path, "c");
        assert_eq!(applied.conflicts[0].upstream_value, Some(json!([{"name": "other"}])));
    }

    #[test]
    fn removal_shifting_a_protected_element_is_withheld() {
        let docs = [json!({"l": [{"name": "a"}, {"name": "b", "v": 1}]})];
        let ops = vec![PatchOp::Remove { resource: "#0".into(), path: p("l.?name=a") }];
        let applied = apply(&docs, &patch(ops), &[guard("#0", "l.1.v")]);
        assert!(!applied.changed);
        assert_eq!(applied.conflicts[0].path, "l.?name=a");
    }

    #[test]
    fn renaming_a_protected_element_is_withheld() {
        let docs = [json!({"l": [{"name": "a", "v": 1}]})];
        let ops = vec![set("#0", "l.0.name", json!("b")), set("#0", "l.0.x", json!(2))];
        let applied = apply(&docs, &patch(ops), &[guard("#0", "l.?name=a.v")]);
        assert_eq!(applied.documents, [json!({"l": [{"name": "a", "v": 1, "x": 2}]})]);
        assert_eq!(applied.conflicts.len(), 1);
        assert_eq!(applied.conflicts[0].path, "l.0.name");
    }

    #[test]
    fn shadowing_a_protected_named_element_is_withheld() {
        let docs = [json!({"l": [{"name": "w"}, {"name": "x", "v": 1}]})];
        let ops = vec![set("#0", "l.0.name", json!("x"))];
        let applied = apply(&docs, &patch(ops), &[guard("#0", "l.?name=x.v")]);
        assert!(!applied.changed);
        assert_eq!(applied.conflicts[0].path, "l.0.name");
    }

    #[test]
    fn removal_before_a_protected_named_element_lands() {
        let docs = [json!({"l": [{"name": "a"}, {"name": "b", "v": 1}]})];
        let ops = vec![PatchOp::Remove { resource: "#0".into(), path: p("l.?name=a") }];
        let applied = apply(&docs, &patch(ops), &[guard("#0", "l.?name=b.v")]);
        assert_eq!(applied.documents, [json!({"l": [{"name": "b", "v": 1}]})]);
        assert!(applied.conflicts.is_empty());
    }

    #[test]
    fn protected_absence_survives_duplicate_named_elements() {
        let docs = [json!({"spec": {"b": []}})];
        let upstream = json!([{"name": "w", "v": null}, {"name": "w", "v": 1}, {"name": "x"}]);
        let ops = vec![set("#0", "spec.b", upstream)];
        let applied = apply(&docs, &patch(ops), &[guard("#0", "spec.b.?name=w")]);
        assert_eq!(applied.documents, [json!({"spec": {"b": [{"name": "x"}]}})]);
        assert_eq!(applied.conflicts.len(), 1);
        assert_eq!(applied.conflicts[0].path, "spec.b.?name=w");
        assert_eq!(applied.conflicts[0].downstream_value, None);
    }

    #[test]
    fn missing_resources_and_unresolved_paths_are_conflicts() {
        let docs = [json!({"a": 1})];
        let ops = vec![
            set("x/Y/z/w", "a", json!(2)),
            PatchOp::Remove { resource: "x/Y/z/w".into(), path: p("a") },
            set("#0", "a.b", json!(2)),
            PatchOp::Remove { resource: "#0".into(), path: p("zz") },
            PatchOp::RemoveDocument { resource: "#9".into() },
        ];
        let applied = apply(&docs, &patch(ops), &[]);
        assert!(!applied.changed);
        let reasons: Vec<_> = applied.conflicts.iter().map(|c| c.reason.as_str()).collect();
        assert_eq!(reasons, [REASON_MISSING_RESOURCE, REASON_MISSING_RESOURCE, REASON_UNRESOLVED_PATH]);
    }

    #[test]
    fn documents_added_replaced_and_removed() {
        let docs = [
            json!({"kind": "K", "metadata": {"name": "a"}, "v": 1, "local": 1}),
            json!({"kind": "K", "metadata": {"name": "b"}}),
        ];
        let replacement = json!({"kind": "K", "metadata": {"name": "a"}, "v": 2});
        let added = json!({"kind": "K", "metadata": {"name": "c"}, "secret": 1, "v": 3});
        let ops = vec![
            PatchOp::AddDocument { resource: "/K//c".into(), document: added },
            PatchOp::AddDocument { resource: "/K//a".into(), document: replacement },
            PatchOp::RemoveDocument { resource: "/K//b".into() },
        ];
        let applied = apply(&docs, &patch(ops.clone()), &[]);
        assert_eq!(
            applied.documents,
            [
                json!({"kind": "K", "metadata": {"name": "a"}, "v": 2}),
                json!({"kind": "K", "metadata": {"name": "c"}, "secret": 1, "v": 3})
            ]
        );
        let protected =
            [guard("/K//a", "local"), guard("/K//b", "metadata.labels"), guard("/K//c", "secret")];
        let applied = apply(&docs, &patch(ops), &protected);
        assert_eq!(
            applied.documents,
            [
                json!({"kind": "K", "metadata": {"name": "a"}, "v": 2, "local": 1}),
                json!({"kind": "K", "metadata": {"name": "b"}}),
                json!({"kind": "K", "metadata": {"name": "c"}, "v": 3}),
            ]
        );
        let conflicts: Vec<_> =
            applied.conflicts.iter().map(|c| format!("{} {}", c.resource, c.path)).collect();
        assert_eq!(conflicts, ["/K//c secret", "/K//a local", "/K//b "]);
        // A protected root keeps a locally deleted document deleted.
        let re_add = vec![PatchOp::AddDocument { resource: "/K//z".into(), document: json!(1) }];
        let applied = apply(&[], &patch(re_add), &[guard("/K//z", "")]);
        assert!(applied.documents.is_empty() && applied.conflicts.len() == 1);
    }

    #[test]
    fn conflict_serde_keeps_null_distinct_from_absent() {
        let conflict = Conflict {
            resource: "#0".into(),
            path: "a".into(),
            reason: REASON_PROTECTED_PATH.into(),
            upstream_value: Some(Value::Null),
            downstream_value: None,
        };
        let json = serde_json::to_value(&conflict).unwrap();
        assert_eq!(
            json,
            json!({"Resource": "#0", "Path": "a", "Reason": "ProtectedPath", "UpstreamValue": null})
        );
        assert_eq!(serde_json::from_value::<Conflict>(json).unwrap(), conflict);
        let protected = guard("#0", "a.?name=x");
        let json = serde_json::to_value(&protected).unwrap();
        assert_eq!(json, json!({"Resource": "#0", "Path": "a.?name=x"}));
        assert_eq!(serde_json::from_value::<ProtectedPath>(json).unwrap(), protected);
    }

    // ---- properties ----

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0i64..4).prop_map(Value::from),
            "[a-c]{0,2}".prop_map(Value::from),
        ]
    }

    fn named_list(inner: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
        let names = prop::sample::subsequence(vec!["w", "x", "y", "z"], 0..=4).prop_shuffle();
        (names, prop::collection::vec(inner, 4)).prop_map(|(names, values)| {
            let items = names.iter().zip(values).map(|(name, v)| json!({"name": name, "v": v}));
            Value::Array(items.collect())
        })
    }

    fn value() -> impl Strategy<Value = Value> {
        scalar().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-d]", inner.clone(), 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
                named_list(inner),
            ]
        })
    }

    fn document() -> impl Strategy<Value = Value> {
        prop_oneof![
            3 => ("[AB]", "[pq]", value()).prop_map(|(kind, name, spec)| {
                json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "spec": spec})
            }),
            1 => value(),
        ]
    }

    fn stream() -> impl Strategy<Value = Vec<Value>> {
        prop::collection::vec(document(), 0..4)
    }

    /// Deterministically edits `value` using `bytes`, to get related versions of a stream.
    fn mutate(value: &Value, bytes: &mut impl Iterator<Item = u8>) -> Value {
        let mut next = || bytes.next().unwrap_or(1);
        let roll = next();
        if roll.is_multiple_of(11) {
            return json!(format!("m{}", roll % 3));
        }
        match value {
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, child) in map {
                    if !bytes.next().unwrap_or(1).is_multiple_of(6) {
                        out.insert(key.clone(), mutate(child, bytes));
                    }
                }
                let roll = bytes.next().unwrap_or(1);
                if roll.is_multiple_of(4) {
                    out.insert(format!("n{}", roll % 3), json!(roll % 5));
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                let mut out = Vec::new();
                for item in items {
                    if !bytes.next().unwrap_or(1).is_multiple_of(6) {
                        out.push(mutate(item, bytes));
                    }
                }
                let roll = bytes.next().unwrap_or(1);
                match roll % 5 {
                    0 => {
                        let name = ["w", "v", "u"][roll as usize % 3];
                        out.push(json!({"name": name, "v": 1}))
                    }
                    1 if out.len() > 1 => out.swap(0, 1),
                    _ => {}
                }
                Value::Array(out)
            }
            _ if roll.is_multiple_of(3) => json!(roll % 4),
            other => other.clone(),
        }
    }

    /// Like `mutate`, but keeps a k8s document's identity (only its `spec` is edited).
    fn mutate_body(doc: &Value, bytes: &[u8]) -> Value {
        let mut bytes = bytes.iter().copied().cycle();
        match doc.get("spec") {
            Some(spec) if doc.get("kind").is_some() => {
                let mut doc = doc.clone();
                doc["spec"] = mutate(spec, &mut bytes);
                doc
            }
            _ => mutate(doc, &mut bytes),
        }
    }

    fn mutate_stream(docs: &[Value], bytes: &[u8]) -> Vec<Value> {
        let mut bytes = bytes.iter().copied().cycle();
        docs.iter().map(|doc| mutate(doc, &mut bytes)).collect()
    }

    /// What `apply(old, &diff(old, new), &[])` guarantees: `new`'s documents, those also in
    /// `old` in `old`'s order, followed by the added ones in `new`'s order.
    fn expected_order(old: &[Value], new: &[Value]) -> Vec<Value> {
        let (old_keys, new_keys) = (stream_keys(old), stream_keys(new));
        let doc = |key: &ResourceKey| new_keys.iter().position(|k| k == key).map(|i| new[i].clone());
        let kept = old_keys.iter().filter_map(doc);
        let added = new_keys.iter().zip(new).filter(|(k, _)| !old_keys.contains(k)).map(|(_, d)| d.clone());
        kept.chain(added).collect()
    }

    fn local_value(path: &Path) -> Value {
        match path.segments().last() {
            Some(Segment::Match { field, value }) => {
                json!({ field.as_str(): value, "local": true })
            }
            _ => json!("LOCAL"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn apply_of_diff_reproduces_new(old in stream(), new in stream(), edits in prop::collection::vec(any::<u8>(), 1..64)) {
            for new in [new, mutate_stream(&old, &edits)] {
                let patch = diff(&old, &new);
                let applied = apply(&old, &patch, &[]);
                prop_assert!(applied.conflicts.is_empty(), "{:?}", applied.conflicts);
                prop_assert_eq!(&applied.documents, &expected_order(&old, &new));
                prop_assert_eq!(applied.changed, applied.documents != old);
                prop_assert_eq!(patch.is_empty(), applied.documents == old);
            }
        }

        #[test]
        fn diff_of_identical_streams_is_empty(docs in stream()) {
            prop_assert!(diff(&docs, &docs).is_empty());
            let applied = apply(&docs, &Patch::default(), &[]);
            prop_assert!(!applied.changed);
            prop_assert_eq!(applied.documents, docs);
        }

        #[test]
        fn protected_path_keeps_downstream_value(old in document(), edits in prop::collection::vec(any::<u8>(), 1..64), pick in any::<prop::sample::Index>()) {
            let new = [mutate_body(&old, &edits)];
            let old = [old];
            let patch = diff(&old, &new);
            let writes: Vec<&PatchOp> = patch.ops.iter().filter(|op| matches!(op, PatchOp::Set { .. } | PatchOp::Remove { .. })).collect();
            if writes.is_empty() {
                return Ok(());
            }
            let chosen = writes[pick.index(writes.len())];
            let (resource, path) = (chosen.resource().clone(), chosen.path());
            let local = local_value(&path);
            let mut downstream = old.to_vec();
            set_path(&mut downstream[0], &path, local.clone()).unwrap();
            let applied = apply(&downstream, &patch, &[ProtectedPath::new(resource.clone(), path.clone())]);
            let doc = &applied.documents[0];
            prop_assert_eq!(get_path(doc, &path), Some(&local));
            prop_assert_eq!(applied.conflicts.len(), 1);
            let conflict = &applied.conflicts[0];
            prop_assert_eq!(&conflict.resource, resource.as_str());
            prop_assert_eq!(&conflict.path, &path.to_string());
            prop_assert_eq!(&conflict.reason, REASON_PROTECTED_PATH);
            let upstream = match chosen { PatchOp::Set { value, .. } => Some(value.clone()), _ => None };
            prop_assert_eq!(&conflict.upstream_value, &upstream);
            prop_assert_eq!(&conflict.downstream_value, &Some(local));
            for op in writes.iter().filter(|op| **op != chosen) {
                match op {
                    PatchOp::Set { path, value, .. } => prop_assert_eq!(get_path(doc, path), Some(value)),
                    _ => prop_assert_eq!(get_path(doc, &op.path()), None),
                }
            }
        }

        #[test]
        fn protected_local_edits_survive_an_upgrade(old in stream(), up in prop::collection::vec(any::<u8>(), 1..64), local in prop::collection::vec(any::<u8>(), 1..64)) {
            let new = mutate_stream(&old, &up);
            let downstream = mutate_stream(&old, &local);
            let protected = changed_paths(&old, &downstream);
            let applied = apply(&downstream, &diff(&old, &new), &protected);
            // Position keys (`#i`) and duplicate ordinals (`…#n`) move when documents are
            // removed, so only unique k8s keys identify the same document after the merge.
            let (before, after) = (stream_keys(&downstream), stream_keys(&applied.documents));
            for guard in protected.iter().filter(|g| !g.resource.as_str().contains('#')) {
                let find = |keys: &[ResourceKey]| keys.iter().position(|k| *k == guard.resource);
                if let (Some(i), Some(j)) = (find(&before), find(&after)) {
                    prop_assert_eq!(
                        get_path(&applied.documents[j], &guard.path),
                        get_path(&downstream[i], &guard.path),
                        "{} {}", guard.resource, guard.path
                    );
                }
            }
        }
    }
}
