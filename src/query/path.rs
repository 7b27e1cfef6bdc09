//! Attribute paths: resolving `Labels.key`, `Space.Slug`, `Conflicts.*.Reason`, ... against
//! an entity's allow-list into steps through the entity JSON.

use super::QueryError;
use super::attrs::{Attr, AttrType, Entity};

/// One step of a resolved attribute path through the entity JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Object key.
    Key(String),
    /// Every element of an array (`*`).
    Any,
}

/// An attribute path checked against an allow-list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AttrPath {
    /// The path as written, e.g. `Unit.UpstreamRevisionNum`.
    pub text: String,
    /// How to reach the value in the JSON (the `Unit.` qualifier is dropped).
    pub steps: Vec<Step>,
    /// Type of the value reached (`String` for a map value).
    pub ty: AttrType,
    /// Whether the value may be absent or null (nullable type, map key, relation field).
    pub nullable: bool,
    /// Whether the path goes through `*` (several values, "any" semantics).
    pub any: bool,
    /// Relation root the path goes through, e.g. `Space`.
    pub relation: Option<&'static str>,
}

fn valid_map_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn allowed(attrs: &[Attr]) -> String {
    attrs.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
}

/// Resolves the path token `text` (starting at 1-based column `col`) against `entity`.
pub(crate) fn resolve(text: &str, col: usize, entity: &'static Entity) -> Result<AttrPath, QueryError> {
    // Segments with their byte offsets (the token is ASCII, so bytes = chars).
    let mut segs: Vec<(usize, &str)> = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c == '.' {
            segs.push((start, &text[start..i]));
            start = i + 1;
        }
    }
    segs.push((start, &text[start..]));
    let err = |i: usize, msg: String| {
        let (off, seg) = segs[i];
        Err(QueryError::new(col + off, seg, msg))
    };

    let mut i = 0;
    if entity.self_qualifier && segs.len() > 1 && segs[0].1 == entity.name {
        i = 1;
    }
    let mut scope: &'static [Attr] = entity.attrs;
    let mut owner = entity.name;
    let mut path = AttrPath {
        text: text.to_string(),
        steps: Vec::new(),
        ty: AttrType::Map,
        nullable: false,
        any: false,
        relation: None,
    };
    loop {
        let (off, seg) = segs[i];
        if seg.is_empty() {
            return err(i, "empty segment in attribute path".into());
        }
        let Some(attr) = scope.iter().find(|a| a.name == seg) else {
            let of = if path.steps.is_empty() { String::new() } else { format!(" of {owner}") };
            return err(i, format!("unknown attribute '{seg}'{of} (allowed: {})", allowed(scope)));
        };
        path.steps.push(Step::Key(seg.to_string()));
        let last = i + 1 == segs.len();
        match attr.ty {
            AttrType::Relation(target) => {
                if path.relation.is_some() || path.any {
                    return err(
                        i,
                        format!(
                            "relation '{seg}' of {owner} is not reachable (relations are one level deep)"
                        ),
                    );
                }
                if last {
                    return err(
                        i,
                        format!(
                            "'{seg}' is a relation to {}; name one of its attributes, e.g. {seg}.Slug",
                            target.name
                        ),
                    );
                }
                path.relation = Some(attr.name);
                path.nullable = true;
                scope = target.attrs;
                owner = target.name;
            }
            AttrType::Map if !last => {
                let key = &text[off + seg.len() + 1..];
                if !valid_map_key(key) {
                    let msg = format!("invalid key '{key}' for map '{seg}' (letters, digits and -_./ only)");
                    return Err(QueryError::new(col + off + seg.len() + 1, key, msg));
                }
                path.steps.push(Step::Key(key.to_string()));
                path.ty = AttrType::String;
                path.nullable = true;
                return Ok(path);
            }
            AttrType::ObjectArray(fields) if !last => {
                if segs[i + 1].1 != "*" {
                    return err(
                        i + 1,
                        format!(
                            "'{seg}' is an array of objects; use '*' to mean any element, e.g. {seg}.*.{}",
                            fields.first().map_or("Field", |f| f.name)
                        ),
                    );
                }
                if i + 2 == segs.len() {
                    return err(
                        i + 1,
                        format!("'*' must be followed by a field of {seg} (allowed: {})", allowed(fields)),
                    );
                }
                path.steps.push(Step::Any);
                path.any = true;
                path.nullable = false;
                scope = fields;
                owner = attr.name;
                i += 1;
            }
            ty if !last => {
                let what = if segs[i + 1].1 == "*" {
                    format!("'*' needs an array of objects, but '{seg}' is {}", ty.describe())
                } else {
                    format!("'{seg}' is {}; it has no attribute '{}'", ty.describe(), segs[i + 1].1)
                };
                return err(i + 1, what);
            }
            ty => {
                path.ty = ty;
                if matches!(ty, AttrType::NullableUuid | AttrType::Map) {
                    path.nullable = true;
                }
                if path.any {
                    path.nullable = false;
                }
                return Ok(path);
            }
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::attrs::{REVISION, SPACE, UNIT};

    fn ok(text: &str, e: &'static Entity) -> AttrPath {
        resolve(text, 1, e).unwrap_or_else(|err| panic!("{err}"))
    }

    fn keys(p: &AttrPath) -> Vec<String> {
        p.steps
            .iter()
            .map(|s| match s {
                Step::Key(k) => k.clone(),
                Step::Any => "*".into(),
            })
            .collect()
    }

    #[test]
    fn plain_and_qualified() {
        let p = ok("HeadRevisionNum", &UNIT);
        assert_eq!(
            (keys(&p), p.ty, p.nullable, p.any),
            (vec!["HeadRevisionNum".into()], AttrType::Int, false, false)
        );
        let q = ok("Unit.HeadRevisionNum", &UNIT);
        assert_eq!((q.steps, q.text.as_str()), (p.steps, "Unit.HeadRevisionNum"));
        assert!(ok("TargetID", &UNIT).nullable);
        assert!(!ok("SpaceID", &UNIT).nullable);
    }

    #[test]
    fn map_keys_take_the_rest_of_the_path() {
        let p = ok("Labels.app.kubernetes.io/name", &UNIT);
        assert_eq!(keys(&p), ["Labels", "app.kubernetes.io/name"]);
        assert_eq!((p.ty, p.nullable), (AttrType::String, true));
        let p = ok("Space.Labels.tier-1_x", &UNIT);
        assert_eq!(keys(&p), ["Space", "Labels", "tier-1_x"]);
        assert_eq!(p.relation, Some("Space"));
        let bare = ok("Annotations", &SPACE);
        assert_eq!((bare.ty, bare.nullable), (AttrType::Map, true));
    }

    #[test]
    fn relations_and_object_arrays() {
        let p = ok("UpstreamUnit.HeadRevisionNum", &UNIT);
        assert_eq!((p.relation, p.nullable), (Some("UpstreamUnit"), true));
        let p = ok("Conflicts.*.Reason", &UNIT);
        assert_eq!(keys(&p), ["Conflicts", "*", "Reason"]);
        assert_eq!((p.any, p.nullable, p.ty), (true, false, AttrType::String));
        let p = ok("UpstreamUnit.Conflicts.*.UpstreamRevisionNum", &UNIT);
        assert_eq!((p.any, p.nullable, p.relation, p.ty), (true, false, Some("UpstreamUnit"), AttrType::Int));
        assert_eq!(ok("ValidationErrors.*.Message", &REVISION).ty, AttrType::String);
    }

    #[test]
    fn error_columns_are_offset_from_the_token() {
        let e = resolve("Space.Nope", 10, &UNIT).unwrap_err();
        assert_eq!((e.column, e.token.as_str()), (16, "Nope"));
        let e = resolve("Labels.bad key", 3, &UNIT).unwrap_err();
        assert_eq!((e.column, e.token.as_str()), (10, "bad key"));
        let e = resolve("Space.Labels.a.b*", 1, &UNIT).unwrap_err();
        assert_eq!((e.column, e.token.as_str()), (14, "a.b*"));
    }
}
