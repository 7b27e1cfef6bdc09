//! Paths inside one document, and reading/writing values at them.
//!
//! Text form: segments joined by `.`, e.g. `spec.template.spec.containers.?name=web.image`.
//! * an all-digit segment is an array index (`containers.0`);
//! * `?field=value` selects the array element whose string `field` equals `value`
//!   (the ConfigHub where-data style), so a path stays valid when elements are reordered or
//!   the downstream has extra elements;
//! * anything else is an object key. Inside a segment `~` is written `~0`, `.` is `~1`, and in
//!   the field of a `?field=value` segment `=` is `~3`. A key that would otherwise read as
//!   something else (empty, all digits, or starting with `?`) is prefixed with the marker `~2`
//!   (key `"0"` is written `~20`, the empty key `~2`).
//!
//! The empty text is the root path: the whole document.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::map::Entry;
use serde_json::{Map, Value};

/// Errors of this module; every message names the path involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath { path: String, reason: String },
    #[error("cannot write {path:?}: {at} is {found}, expected {expected}")]
    TypeMismatch { path: String, at: String, found: &'static str, expected: &'static str },
    #[error("cannot write {path:?}: {at} does not exist")]
    Unresolved { path: String, at: String },
    #[error("cannot write {path:?}: the value must be an object whose {field:?} is {value:?}")]
    MatchValue { path: String, field: String, value: String },
    #[error("cannot remove {path:?}: a whole document is removed with RemoveDocument")]
    RemoveRoot { path: String },
}

/// One step of a [`Path`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    /// An object key.
    Key(String),
    /// An array index (0-based).
    Index(usize),
    /// The array element that is an object whose string `field` equals `value`.
    Match { field: String, value: String },
}

impl Segment {
    pub fn key(key: impl Into<String>) -> Self {
        Segment::Key(key.into())
    }

    /// `?name=<value>`: the element of a k8s-style named list.
    pub fn named(value: impl Into<String>) -> Self {
        Segment::Match { field: "name".to_owned(), value: value.into() }
    }
}

/// A dotted path within one document; the empty path is the document root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Path {
    segments: Vec<Segment>,
}

impl Path {
    pub fn root() -> Self {
        Path::default()
    }

    pub fn new(segments: Vec<Segment>) -> Self {
        Path { segments }
    }

    pub fn parse(text: &str) -> Result<Self, MergeError> {
        if text.is_empty() {
            return Ok(Path::root());
        }
        text.split('.').map(|raw| parse_segment(raw, text)).collect::<Result<Vec<_>, _>>().map(Path::new)
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// This path extended by one segment.
    pub fn child(&self, segment: Segment) -> Path {
        let mut segments = self.segments.clone();
        segments.push(segment);
        Path { segments }
    }

    /// True when `self` equals `other` or is an ancestor of it (the root is a prefix of all).
    pub fn is_prefix_of(&self, other: &Path) -> bool {
        other.segments.starts_with(&self.segments)
    }

    /// `self` relative to `prefix`, when `prefix.is_prefix_of(self)`.
    pub fn strip_prefix(&self, prefix: &Path) -> Option<Path> {
        self.segments.strip_prefix(prefix.segments.as_slice()).map(|rest| Path::new(rest.to_vec()))
    }
}

fn parse_segment(raw: &str, whole: &str) -> Result<Segment, MergeError> {
    let invalid =
        |reason: &str| MergeError::InvalidPath { path: whole.to_owned(), reason: reason.to_owned() };
    if let Some(rest) = raw.strip_prefix("~2") {
        return Ok(Segment::Key(unescape(rest, whole)?));
    }
    if let Some(body) = raw.strip_prefix('?') {
        let (field, value) =
            body.split_once('=').ok_or_else(|| invalid("a `?` segment needs the form ?field=value"))?;
        let field = unescape(field, whole)?;
        if field.is_empty() {
            return Err(invalid("empty field in a `?field=value` segment"));
        }
        let value = unescape(value, whole)?;
        return Ok(Segment::Match { field, value });
    }
    if raw.is_empty() {
        return Err(invalid("empty segment (write an empty key as ~2)"));
    }
    if raw.bytes().all(|b| b.is_ascii_digit()) {
        return raw.parse().map(Segment::Index).map_err(|_| invalid("array index out of range"));
    }
    Ok(Segment::Key(unescape(raw, whole)?))
}

fn unescape(raw: &str, whole: &str) -> Result<String, MergeError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('~'),
            Some('1') => out.push('.'),
            Some('3') => out.push('='),
            _ => {
                return Err(MergeError::InvalidPath {
                    path: whole.to_owned(),
                    reason: "`~` must be followed by 0, 1 or 3 (or 2 at a segment's start)".to_owned(),
                });
            }
        }
    }
    Ok(out)
}

fn escape(f: &mut fmt::Formatter<'_>, text: &str, escape_eq: bool) -> fmt::Result {
    for c in text.chars() {
        match c {
            '~' => f.write_str("~0")?,
            '.' => f.write_str("~1")?,
            '=' if escape_eq => f.write_str("~3")?,
            c => fmt::Write::write_char(f, c)?,
        }
    }
    Ok(())
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Segment::Key(key) => {
                if key.is_empty() || key.bytes().all(|b| b.is_ascii_digit()) || key.starts_with('?') {
                    f.write_str("~2")?;
                }
                escape(f, key, false)
            }
            Segment::Index(index) => write!(f, "{index}"),
            Segment::Match { field, value } => {
                f.write_str("?")?;
                escape(f, field, true)?;
                f.write_str("=")?;
                escape(f, value, false)
            }
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{segment}")?;
        }
        Ok(())
    }
}

impl FromStr for Path {
    type Err = MergeError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Path::parse(text)
    }
}

/// Serialized as its text form.
impl Serialize for Path {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Path {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Path::parse(&text).map_err(serde::de::Error::custom)
    }
}

fn element_matches(element: &Value, field: &str, value: &str) -> bool {
    element.get(field).and_then(Value::as_str) == Some(value)
}

fn child<'a>(value: &'a Value, segment: &Segment) -> Option<&'a Value> {
    match (segment, value) {
        (Segment::Key(key), Value::Object(map)) => map.get(key),
        (Segment::Index(index), Value::Array(items)) => items.get(*index),
        (Segment::Match { field, value }, Value::Array(items)) => {
            items.iter().find(|e| element_matches(e, field, value))
        }
        _ => None,
    }
}

fn child_mut<'a>(value: &'a mut Value, segment: &Segment) -> Option<&'a mut Value> {
    match (segment, value) {
        (Segment::Key(key), Value::Object(map)) => map.get_mut(key),
        (Segment::Index(index), Value::Array(items)) => items.get_mut(*index),
        (Segment::Match { field, value }, Value::Array(items)) => {
            items.iter_mut().find(|e| element_matches(e, field, value))
        }
        _ => None,
    }
}

/// The value at `path`, if every segment resolves.
pub fn get_path<'a>(doc: &'a Value, path: &Path) -> Option<&'a Value> {
    path.segments.iter().try_fold(doc, child)
}

/// Mutable access to the value at `path`, if every segment resolves.
pub fn get_path_mut<'a>(doc: &'a mut Value, path: &Path) -> Option<&'a mut Value> {
    path.segments.iter().try_fold(doc, child_mut)
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn describe(path: &Path, depth: usize) -> String {
    if depth == 0 {
        "the document root".to_owned()
    } else {
        Path::new(path.segments[..depth].to_vec()).to_string()
    }
}

fn unresolved(path: &Path, depth: usize) -> MergeError {
    MergeError::Unresolved { path: path.to_string(), at: describe(path, depth) }
}

/// Sets (or replaces) the value at `path`; the root path replaces the whole document.
///
/// Missing objects along the way are created, and a `null` met where an object is needed is
/// replaced by one, as long as every remaining segment is an object key. A missing array
/// element (index out of range, no element matching `?field=value`) is an error, except that
/// a last segment `?field=value` matching nothing appends `value`. With a last segment
/// `?field=value`, `value` must be an object whose `field` is that string (so the path still
/// resolves afterwards). Going into a scalar is an error. On error `doc` is left unchanged.
pub fn set_path(doc: &mut Value, path: &Path, value: Value) -> Result<(), MergeError> {
    set_at(doc, path, 0, value)
}

fn set_at(cur: &mut Value, path: &Path, depth: usize, value: Value) -> Result<(), MergeError> {
    let Some(segment) = path.segments.get(depth) else {
        *cur = value;
        return Ok(());
    };
    let last = depth + 1 == path.segments.len();
    // Creating objects only when every remaining segment is a key makes creation infallible,
    // which keeps `set_path` atomic.
    let creatable = |from: usize| path.segments[from..].iter().all(|s| matches!(s, Segment::Key(_)));
    if cur.is_null() && creatable(depth) {
        *cur = Value::Object(Map::new());
    }
    let found = kind_of(cur);
    let mismatch = |expected| MergeError::TypeMismatch {
        path: path.to_string(),
        at: describe(path, depth),
        found,
        expected,
    };
    match (segment, cur) {
        (Segment::Key(key), Value::Object(map)) if last => {
            map.insert(key.clone(), value);
            Ok(())
        }
        (Segment::Key(key), Value::Object(map)) => {
            let child = match map.entry(key.clone()) {
                Entry::Occupied(entry) => entry.into_mut(),
                Entry::Vacant(entry) if creatable(depth + 1) => entry.insert(Value::Object(Map::new())),
                Entry::Vacant(_) => return Err(unresolved(path, depth + 1)),
            };
            set_at(child, path, depth + 1, value)
        }
        (Segment::Key(_), _) => Err(mismatch("an object")),
        (Segment::Index(index), Value::Array(items)) => match items.get_mut(*index) {
            Some(child) => set_at(child, path, depth + 1, value),
            None => Err(unresolved(path, depth + 1)),
        },
        (Segment::Match { field, value: wanted }, Value::Array(items)) => {
            if last && !element_matches(&value, field, wanted) {
                return Err(MergeError::MatchValue {
                    path: path.to_string(),
                    field: field.clone(),
                    value: wanted.clone(),
                });
            }
            match items.iter_mut().find(|e| element_matches(e, field, wanted)) {
                Some(child) => set_at(child, path, depth + 1, value),
                None if last => {
                    items.push(value);
                    Ok(())
                }
                None => Err(unresolved(path, depth + 1)),
            }
        }
        _ => Err(mismatch("an array")),
    }
}

/// Removes the value at `path` and returns it; `Ok(None)` when there is nothing there.
/// Object keys keep the order of the remaining keys; array elements after it shift down.
/// The root path is an error (a document is removed as a whole by `RemoveDocument`).
pub fn remove_path(doc: &mut Value, path: &Path) -> Result<Option<Value>, MergeError> {
    let Some((last, parents)) = path.segments.split_last() else {
        return Err(MergeError::RemoveRoot { path: path.to_string() });
    };
    let Some(parent) = parents.iter().try_fold(doc, child_mut) else {
        return Ok(None);
    };
    Ok(match (last, parent) {
        (Segment::Key(key), Value::Object(map)) => map.shift_remove(key),
        (Segment::Index(index), Value::Array(items)) if *index < items.len() => Some(items.remove(*index)),
        (Segment::Match { field, value }, Value::Array(items)) => {
            items.iter().position(|e| element_matches(e, field, value)).map(|index| items.remove(index))
        }
        _ => None,
    })
}

/// `path` with each `?field=value` segment that resolves in `doc` replaced by the index it
/// resolves to (up to the first segment that does not resolve), so that paths written in
/// either style can be compared against the same document.
pub(crate) fn resolve_in(doc: &Value, path: &Path) -> Path {
    let mut cur = Some(doc);
    let segments = path
        .segments
        .iter()
        .map(|segment| {
            let (next, resolved) = match (cur, segment) {
                (Some(Value::Array(items)), Segment::Match { field, value }) => {
                    match items.iter().position(|e| element_matches(e, field, value)) {
                        Some(index) => (items.get(index), Segment::Index(index)),
                        None => (None, segment.clone()),
                    }
                }
                (Some(value), _) => (child(value, segment), segment.clone()),
                (None, _) => (None, segment.clone()),
            };
            cur = next;
            resolved
        })
        .collect();
    Path::new(segments)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn p(text: &str) -> Path {
        Path::parse(text).unwrap()
    }

    #[test]
    fn parses_and_prints_all_segment_kinds() {
        let path = p("spec.template.spec.containers.?name=web.image");
        assert_eq!(path.segments()[3], Segment::key("containers"));
        assert_eq!(path.segments()[4], Segment::named("web"));
        assert_eq!(path.to_string(), "spec.template.spec.containers.?name=web.image");
        assert_eq!(p("a.0").segments()[1], Segment::Index(0));
        assert!(p("").is_root());
        assert_eq!(Path::root().to_string(), "");
    }

    #[test]
    fn escapes_round_trip() {
        let path = Path::new(vec![
            Segment::key("example.com/team"),
            Segment::key("a~b"),
            Segment::key("0"),
            Segment::key(""),
            Segment::key("?x"),
            Segment::Match { field: "a=b.c".into(), value: "x=y.z~".into() },
        ]);
        let text = path.to_string();
        assert_eq!(text, "example~1com/team.a~0b.~20.~2.~2?x.?a~3b~1c=x=y~1z~0");
        assert_eq!(p(&text), path);
    }

    #[test]
    fn rejects_malformed_paths_naming_them() {
        for bad in ["a..b", "a.", "?name", "?=x", "a~", "a~9", "a~2b", "99999999999999999999999"] {
            let err = Path::parse(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn prefix_relation() {
        assert!(p("spec.replicas").is_prefix_of(&p("spec.replicas")));
        assert!(p("spec").is_prefix_of(&p("spec.replicas")));
        assert!(Path::root().is_prefix_of(&p("spec")));
        assert!(!p("spec.replicas").is_prefix_of(&p("spec")));
        assert!(!p("spec.rep").is_prefix_of(&p("spec.replicas")));
        assert_eq!(p("a.b.c").strip_prefix(&p("a")), Some(p("b.c")));
        assert_eq!(p("a.b").strip_prefix(&p("x")), None);
    }

    #[test]
    fn serde_uses_text_form() {
        let path = p("a.?name=x.0");
        assert_eq!(serde_json::to_value(&path).unwrap(), json!("a.?name=x.0"));
        assert_eq!(serde_json::from_value::<Path>(json!("a.?name=x.0")).unwrap(), path);
        assert!(serde_json::from_value::<Path>(json!("a..b")).is_err());
    }

    #[test]
    fn get_resolves_keys_indices_and_matches() {
        let doc = json!({"c": [{"name": "a", "v": 1}, {"name": "b", "v": 2}], "n": null});
        assert_eq!(get_path(&doc, &p("c.?name=b.v")), Some(&json!(2)));
        assert_eq!(get_path(&doc, &p("c.0.v")), Some(&json!(1)));
        assert_eq!(get_path(&doc, &p("c.?name=z")), None);
        assert_eq!(get_path(&doc, &p("c.x")), None);
        assert_eq!(get_path(&doc, &p("n")), Some(&Value::Null));
        assert_eq!(get_path(&doc, &Path::root()), Some(&doc));
    }

    #[test]
    fn set_creates_intermediate_objects_and_replaces_null() {
        let mut doc = json!({"spec": null});
        set_path(&mut doc, &p("spec.strategy.type"), json!("Recreate")).unwrap();
        set_path(&mut doc, &p("metadata.labels.app"), json!("web")).unwrap();
        assert_eq!(
            doc,
            json!({"spec": {"strategy": {"type": "Recreate"}}, "metadata": {"labels": {"app": "web"}}})
        );
        set_path(&mut doc, &Path::root(), json!(1)).unwrap();
        assert_eq!(doc, json!(1));
    }

    #[test]
    fn set_into_named_element_replaces_or_appends() {
        let mut doc = json!({"env": [{"name": "A", "value": "1"}]});
        set_path(&mut doc, &p("env.?name=A.value"), json!("2")).unwrap();
        set_path(&mut doc, &p("env.?name=B"), json!({"name": "B", "value": "3"})).unwrap();
        assert_eq!(doc, json!({"env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]}));
        let err = set_path(&mut doc, &p("env.?name=C"), json!({"name": "D"})).unwrap_err();
        assert!(matches!(err, MergeError::MatchValue { .. }));
    }

    #[test]
    fn set_errors_name_the_path_and_leave_doc_unchanged() {
        let original = json!({"spec": {"replicas": 2}, "list": [1], "env": []});
        let cases = [
            ("spec.replicas.x", "spec.replicas is a number"),
            ("list.x", "list is an array"),
            ("spec.0", "spec is an object"),
            ("list.5", "list.5 does not exist"),
            ("env.?name=a.value", "env.?name=a does not exist"),
            ("new.list.0", "new does not exist"),
        ];
        for (path, message) in cases {
            let mut doc = original.clone();
            let err = set_path(&mut doc, &p(path), json!(1)).unwrap_err();
            let text = err.to_string();
            assert!(text.contains(&format!("{path:?}")), "{text}");
            assert!(text.contains(message), "{text}");
            assert_eq!(doc, original, "{path}");
        }
    }

    #[test]
    fn remove_keeps_key_order_and_ignores_missing() {
        let mut doc = json!({"a": 1, "b": 2, "c": 3, "l": [{"name": "x"}, {"name": "y"}]});
        assert_eq!(remove_path(&mut doc, &p("a")).unwrap(), Some(json!(1)));
        assert_eq!(remove_path(&mut doc, &p("l.?name=x")).unwrap(), Some(json!({"name": "x"})));
        assert_eq!(remove_path(&mut doc, &p("zz.y")).unwrap(), None);
        assert_eq!(remove_path(&mut doc, &p("l.7")).unwrap(), None);
        let keys: Vec<_> = doc.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["b", "c", "l"]);
        assert!(matches!(remove_path(&mut doc, &Path::root()), Err(MergeError::RemoveRoot { .. })));
    }

    #[test]
    fn resolve_turns_matches_into_indices() {
        let doc = json!({"c": [{"name": "a"}, {"name": "b", "x": [{"name": "q"}]}]});
        assert_eq!(resolve_in(&doc, &p("c.?name=b.x.?name=q.v")), p("c.1.x.0.v"));
        assert_eq!(resolve_in(&doc, &p("c.?name=z.x.?name=q")), p("c.?name=z.x.?name=q"));
    }

    fn segment() -> impl Strategy<Value = Segment> {
        let text = "[a-z0-9.~=?]{0,4}";
        prop_oneof![
            text.prop_map(Segment::Key),
            (0usize..20).prop_map(Segment::Index),
            ("[a-z.~=]{1,3}", text).prop_map(|(field, value)| Segment::Match { field, value }),
        ]
    }

    proptest! {
        #[test]
        fn text_form_round_trips(segments in prop::collection::vec(segment(), 0..5)) {
            let path = Path::new(segments);
            prop_assert_eq!(Path::parse(&path.to_string()).unwrap(), path);
        }
    }
}
