//! Evaluation of parsed clauses over an entity's JSON, with SQL three-valued logic.

use std::cmp::Ordering;

use serde_json::Value;

use super::ast::{Clause, CmpOp, Literal, Operand, Predicate, Rhs, TruthTest};
use super::attrs::{AttrType, Class};
use super::path::{AttrPath, Step};

/// A three-valued truth value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tri {
    True,
    False,
    Unknown,
}

impl Tri {
    fn from_bool(b: bool) -> Tri {
        if b { Tri::True } else { Tri::False }
    }

    fn not(self) -> Tri {
        match self {
            Tri::True => Tri::False,
            Tri::False => Tri::True,
            Tri::Unknown => Tri::Unknown,
        }
    }

    /// Three-valued OR over several results ("any element"); FALSE when there are none.
    fn any(items: impl IntoIterator<Item = Tri>) -> Tri {
        let mut out = Tri::False;
        for t in items {
            match t {
                Tri::True => return Tri::True,
                Tri::Unknown => out = Tri::Unknown,
                Tri::False => {}
            }
        }
        out
    }
}

/// A typed scalar read from the JSON (or a literal).
#[derive(Debug, Clone, Copy)]
enum Scalar<'a> {
    Null,
    Str(&'a str),
    Int(i64),
    Bool(bool),
}

/// Every value the path reaches: one for a plain path (None when missing or null), one per
/// array element for a `*` path.
fn walk<'a>(v: Option<&'a Value>, steps: &[Step], out: &mut Vec<Option<&'a Value>>) {
    match steps.split_first() {
        None => out.push(v.filter(|x| !x.is_null())),
        Some((Step::Key(k), rest)) => walk(v.and_then(|x| x.get(k.as_str())), rest, out),
        Some((Step::Any, rest)) => {
            if let Some(Value::Array(items)) = v {
                for item in items {
                    walk(Some(item), rest, out);
                }
            }
        }
    }
}

fn raw_values<'a>(path: &AttrPath, root: &'a Value) -> Vec<Option<&'a Value>> {
    let mut out = Vec::new();
    walk(Some(root), &path.steps, &mut out);
    out
}

/// Reads a JSON value as a scalar of class `class`; a JSON value of the wrong type is NULL.
fn typed(class: Class, v: Option<&Value>) -> Scalar<'_> {
    match (class, v) {
        (Class::Str | Class::Uuid, Some(Value::String(s))) => Scalar::Str(s),
        (Class::Int, Some(v)) => v.as_i64().map_or(Scalar::Null, Scalar::Int),
        (Class::Bool, Some(Value::Bool(b))) => Scalar::Bool(*b),
        _ => Scalar::Null,
    }
}

fn literal(l: &Literal) -> Scalar<'_> {
    match l {
        Literal::Str(s) => Scalar::Str(s),
        Literal::Int(i) => Scalar::Int(*i),
        Literal::Bool(b) => Scalar::Bool(*b),
    }
}

/// Values of the left operand, typed.
fn operand_values<'a>(op: &Operand, root: &'a Value) -> Vec<Scalar<'a>> {
    match op {
        Operand::Attr(p) => {
            let class = p.ty.class();
            raw_values(p, root).into_iter().map(|v| typed(class, v)).collect()
        }
        Operand::Len(p) => raw_values(p, root)
            .into_iter()
            .map(|v| match v {
                None => Scalar::Int(0),
                Some(Value::Array(a)) => Scalar::Int(a.len() as i64),
                Some(Value::Object(m)) => Scalar::Int(m.len() as i64),
                Some(Value::String(s)) => Scalar::Int(s.chars().count() as i64),
                Some(_) => Scalar::Null,
            })
            .collect(),
    }
}

fn order(a: Scalar<'_>, b: Scalar<'_>, fold_case: bool) -> Option<Ordering> {
    match (a, b) {
        (Scalar::Str(x), Scalar::Str(y)) if fold_case => {
            let (x, y) = (x.bytes(), y.bytes());
            Some(x.map(|b| b.to_ascii_lowercase()).cmp(y.map(|b| b.to_ascii_lowercase())))
        }
        (Scalar::Str(x), Scalar::Str(y)) => Some(x.cmp(y)),
        (Scalar::Int(x), Scalar::Int(y)) => Some(x.cmp(&y)),
        (Scalar::Bool(x), Scalar::Bool(y)) => Some(x.cmp(&y)),
        _ => None,
    }
}

fn compare(op: CmpOp, a: Scalar<'_>, b: Scalar<'_>, fold_case: bool) -> Tri {
    let Some(o) = order(a, b, fold_case) else {
        return Tri::Unknown;
    };
    Tri::from_bool(match op {
        CmpOp::Eq => o == Ordering::Equal,
        CmpOp::Ne => o != Ordering::Equal,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Le => o != Ordering::Greater,
        CmpOp::Ge => o != Ordering::Less,
    })
}

fn equal(a: Scalar<'_>, b: Scalar<'_>, fold_case: bool) -> Tri {
    compare(CmpOp::Eq, a, b, fold_case)
}

fn negate_if(t: Tri, negated: bool) -> Tri {
    if negated { t.not() } else { t }
}

fn lhs_type(op: &Operand) -> AttrType {
    match op {
        Operand::Attr(p) => p.ty,
        Operand::Len(_) => AttrType::Int,
    }
}

/// Evaluates one clause, truth test included.
pub(crate) fn clause(c: &Clause, root: &Value) -> Tri {
    let ty = lhs_type(&c.lhs);
    let fold = ty.class() == Class::Uuid;
    let result = match (&c.pred, &c.lhs) {
        (Predicate::IsNull { negated }, Operand::Attr(p)) => Tri::any(
            raw_values(p, root).into_iter().map(|v| negate_if(Tri::from_bool(v.is_none()), *negated)),
        ),
        (Predicate::Contains(l), Operand::Attr(p)) => {
            let class = match p.ty {
                AttrType::Array(elem) => elem.class(),
                _ => Class::Other,
            };
            let fold = class == Class::Uuid;
            let want = literal(l);
            Tri::any(raw_values(p, root).into_iter().map(|v| match v {
                Some(Value::Array(items)) => Tri::from_bool(
                    items.iter().any(|it| equal(typed(class, Some(it)), want, fold) == Tri::True),
                ),
                _ => Tri::Unknown,
            }))
        }
        (pred, _) => {
            let lhs = operand_values(&c.lhs, root);
            Tri::any(lhs.into_iter().map(|a| predicate(pred, a, fold, root)))
        }
    };
    match c.truth {
        None => result,
        Some(TruthTest::True) => Tri::from_bool(result == Tri::True),
        Some(TruthTest::False) => Tri::from_bool(result == Tri::False),
        Some(TruthTest::NotTrue) => Tri::from_bool(result != Tri::True),
        Some(TruthTest::NotFalse) => Tri::from_bool(result != Tri::False),
    }
}

fn predicate(pred: &Predicate, a: Scalar<'_>, fold: bool, root: &Value) -> Tri {
    match pred {
        Predicate::Compare(op, Rhs::Lit(l)) => compare(*op, a, literal(l), fold),
        Predicate::Compare(op, Rhs::Attr(p)) => {
            let class = p.ty.class();
            let fold = fold || class == Class::Uuid;
            Tri::any(raw_values(p, root).into_iter().map(|b| compare(*op, a, typed(class, b), fold)))
        }
        Predicate::Match { negated, pattern, .. } => match a {
            Scalar::Str(s) => negate_if(Tri::from_bool(pattern.regex.is_match(s)), *negated),
            _ => Tri::Unknown,
        },
        Predicate::In { negated, items } => {
            negate_if(Tri::any(items.iter().map(|l| equal(a, literal(l), fold))), *negated)
        }
        Predicate::Bare => match a {
            Scalar::Bool(b) => Tri::from_bool(b),
            _ => Tri::Unknown,
        },
        // Handled in `clause` (they need the raw JSON value).
        Predicate::Contains(_) | Predicate::IsNull { .. } => Tri::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::WhereExpr;
    use crate::query::attrs::{Entity, REVISION, UNIT, USER};
    use serde_json::json;

    fn m(src: &str, e: &'static Entity, v: &Value) -> bool {
        WhereExpr::parse(src, e).unwrap_or_else(|err| panic!("{err}")).matches(v)
    }

    const A: &str = "6f1c2a34-0000-4000-8000-00000000000a";
    const A_UP: &str = "6F1C2A34-0000-4000-8000-00000000000A";

    #[test]
    fn tri_logic() {
        use Tri::*;
        assert_eq!(Tri::any([]), False);
        assert_eq!(Tri::any([False, Unknown]), Unknown);
        assert_eq!(Tri::any([Unknown, True]), True);
        assert_eq!(Unknown.not(), Unknown);
        assert_eq!(True.not(), False);
    }

    #[test]
    fn null_comparisons_are_unknown() {
        let v = json!({"TargetID": null, "Slug": "a"});
        for src in ["TargetID = 'x'", "TargetID != 'x'", "TargetID IN ('x')", "TargetID NOT IN ('x')"] {
            assert!(!m(src, &UNIT, &v), "{src}");
        }
        // Truth tests turn UNKNOWN into a definite answer.
        assert!(m(&format!("TargetID = '{A}' IS NOT FALSE"), &UNIT, &v));
        assert!(m(&format!("TargetID = '{A}' IS NOT TRUE"), &UNIT, &v));
        assert!(!m(&format!("TargetID = '{A}' IS TRUE"), &UNIT, &v));
        assert!(!m(&format!("TargetID = '{A}' IS FALSE"), &UNIT, &v));
        let set = json!({ "TargetID": A_UP });
        assert!(m(&format!("TargetID = '{A}' IS NOT FALSE"), &UNIT, &set));
        assert!(m(&format!("TargetID = '{A}' IS TRUE"), &UNIT, &set));
        assert!(!m(&format!("TargetID = '{A}' IS FALSE"), &UNIT, &set));
        let other = json!({ "TargetID": "6f1c2a34-0000-4000-8000-00000000000b" });
        assert!(!m(&format!("TargetID = '{A}' IS NOT FALSE"), &UNIT, &other));
        assert!(m(&format!("TargetID = '{A}' IS FALSE"), &UNIT, &other));
        // Missing keys behave like null; IS NULL sees both.
        assert!(m("TargetID IS NULL AND UpstreamUnitID IS NULL", &UNIT, &v));
        assert!(!m("TargetID IS NOT NULL", &UNIT, &v));
        assert!(m("TargetID IS NOT NULL", &UNIT, &set));
        assert!(m("TargetID IS NULL IS TRUE", &UNIT, &v));
    }

    #[test]
    fn uuids_compare_case_insensitively() {
        let v = json!({"SpaceID": A_UP, "UpstreamSpaceID": A, "UnitID": A});
        assert!(m(&format!("SpaceID = '{A}'"), &UNIT, &v));
        assert!(m(&format!("SpaceID IN ('x', '{A}')"), &UNIT, &v));
        assert!(!m(&format!("SpaceID != '{A}'"), &UNIT, &v));
        assert!(m("SpaceID = UpstreamSpaceID AND UnitID = SpaceID", &UNIT, &v));
        let tags = json!({"Tags": [A_UP, "b"]});
        assert!(m(&format!("Tags ? '{A}'"), &REVISION, &tags));
        assert!(!m("Tags ? 'c'", &REVISION, &tags));
    }

    #[test]
    fn strings_are_case_sensitive_and_lexicographic() {
        let v =
            json!({"Slug": "app", "CreatedAt": "2025-01-07T10:00:00Z", "UpdatedAt": "2025-01-06T23:59:59Z"});
        assert!(!m("Slug = 'APP'", &UNIT, &v));
        assert!(m("Slug < 'apq' AND Slug > 'ap' AND Slug <= 'app' AND Slug >= 'app'", &UNIT, &v));
        assert!(m("CreatedAt >= '2025-01-07'", &UNIT, &v));
        assert!(!m("UpdatedAt >= '2025-01-07'", &UNIT, &v));
        assert!(m("CreatedAt > UpdatedAt", &UNIT, &v));
    }

    #[test]
    fn like_and_ilike() {
        let v = json!({"Slug": "app-1", "DisplayName": "A.c 100%", "LastChangeDescription": "line1\nline2"});
        assert!(m("Slug LIKE 'app-%'", &UNIT, &v));
        assert!(m("Slug ~~ 'app-_'", &UNIT, &v));
        assert!(!m("Slug LIKE 'pp-%'", &UNIT, &v), "anchored at the start");
        assert!(!m("Slug LIKE 'app'", &UNIT, &v), "anchored at the end");
        assert!(!m("Slug LIKE 'APP-%'", &UNIT, &v));
        assert!(m("Slug ILIKE 'APP-%'", &UNIT, &v));
        assert!(m("Slug NOT LIKE 'web-%' AND Slug !~~ 'x%' AND Slug NOT ILIKE 'WEB%'", &UNIT, &v));
        assert!(m("DisplayName LIKE 'A.c 100\\%'", &UNIT, &v), "escaped %");
        assert!(!m("DisplayName LIKE 'Abc%'", &UNIT, &v), "'.' is literal");
        assert!(m("LastChangeDescription LIKE 'line1%2'", &UNIT, &v), "% spans newlines");
        let none = json!({});
        assert!(!m("Slug LIKE '%'", &UNIT, &none));
        assert!(!m("Slug NOT LIKE 'x'", &UNIT, &none));
    }

    #[test]
    fn regexes_are_unanchored() {
        let v = json!({"Slug": "app-12"});
        assert!(m("Slug ~ 'pp'", &UNIT, &v));
        assert!(m("Slug ~ '^app-[0-9]+$'", &UNIT, &v));
        assert!(!m("Slug ~ 'APP'", &UNIT, &v));
        assert!(m("Slug ~* 'APP'", &UNIT, &v));
        assert!(m("Slug !~ 'web'", &UNIT, &v));
        assert!(!m("Slug !~ 'app'", &UNIT, &v));
        assert!(!m("Slug !~* 'APP'", &UNIT, &v));
    }

    #[test]
    fn in_lists() {
        let v = json!({"HeadRevisionNum": 3, "Slug": "b"});
        assert!(m("HeadRevisionNum IN (1, 3) AND Slug IN ('a', 'b')", &UNIT, &v));
        assert!(!m("HeadRevisionNum NOT IN (1, 3)", &UNIT, &v));
        assert!(m("HeadRevisionNum NOT IN (-3) AND Slug NOT IN ('c')", &UNIT, &v));
    }

    #[test]
    fn len() {
        let v =
            json!({"Labels": {"a": "1", "b": "2"}, "Slug": "héllo", "Conflicts": [{}, {}, {}], "Tags": []});
        assert!(m("LEN(Labels) = 2 AND LEN(Slug) = 5 AND LEN(Conflicts) = 3", &UNIT, &v));
        assert!(m("LEN(ValidationErrors) = 0 AND LEN(Annotations) = 0", &UNIT, &v), "missing is 0");
        assert!(m("LEN(Tags) = 0 AND LEN(ChangeOrders) = 0", &REVISION, &v));
        assert!(m("LEN(Labels.a) = 1 AND LEN(Labels.zzz) = 0", &UNIT, &v));
        assert!(!m("LEN(Slug) > 5", &UNIT, &v));
        // A JSON value of the wrong type has no length.
        assert!(!m("LEN(Slug) >= 0", &UNIT, &json!({"Slug": 5})));
    }

    #[test]
    fn any_element_of_object_arrays() {
        let v = json!({"Conflicts": [
            {"Reason": "Changed", "UpstreamRevisionNum": 2},
            {"Reason": "ProtectedPath", "UpstreamRevisionNum": 7},
            {"Path": "no reason here"}
        ], "HeadRevisionNum": 5});
        assert!(m("Conflicts.*.Reason = 'ProtectedPath'", &UNIT, &v));
        assert!(m("Conflicts.*.Reason != 'ProtectedPath'", &UNIT, &v), "some element differs");
        assert!(!m("Conflicts.*.Reason = 'Other'", &UNIT, &v));
        assert!(m("Conflicts.*.UpstreamRevisionNum > HeadRevisionNum", &UNIT, &v));
        assert!(m("Conflicts.*.Reason ~ '^Prot' AND Conflicts.*.Reason IN ('Changed')", &UNIT, &v));
        // An element without the field makes that comparison UNKNOWN, not TRUE.
        assert!(m("Conflicts.*.Reason = 'Other' IS NOT FALSE", &UNIT, &v));
        let empty = json!({"Conflicts": []});
        assert!(!m("Conflicts.*.Reason != 'x'", &UNIT, &empty));
        assert!(m("Conflicts.*.Reason = 'x' IS FALSE", &UNIT, &empty));
        assert!(!m("Conflicts.*.Reason = 'x'", &UNIT, &json!({})));
        let only = json!({"Conflicts": [{"Reason": "x"}]});
        assert!(!m("Conflicts.*.Reason != 'x'", &UNIT, &only));
    }

    #[test]
    fn wrong_json_types_are_null() {
        let v = json!({"Slug": 5, "HeadRevisionNum": "5", "DataSize": 1.5, "Labels": {"n": 1}});
        assert!(!m("Slug = '5'", &UNIT, &v));
        assert!(!m("Slug != '5'", &UNIT, &v));
        assert!(!m("HeadRevisionNum = 5", &UNIT, &v));
        assert!(!m("DataSize > 1", &UNIT, &v));
        assert!(m("Labels.n IS NOT NULL", &UNIT, &v), "present, though not a string");
        assert!(!m("Labels.n = '1'", &UNIT, &v));
        // A non-object root has no attributes at all.
        assert!(m("TargetID IS NULL AND LEN(Labels) = 0", &UNIT, &json!([1, 2])));
        assert!(!m("Slug = 'a'", &UNIT, &json!("Slug")));
    }

    #[test]
    fn bools() {
        let admin = json!({"Admin": true});
        let plain = json!({"Admin": false});
        assert!(m("Admin = true AND Admin IS TRUE AND Admin IS NOT FALSE", &USER, &admin));
        assert!(!m("Admin = true", &USER, &plain));
        assert!(m("Admin != TRUE AND Admin IS FALSE AND Admin IS NOT TRUE", &USER, &plain));
        assert!(m("Admin IS NOT TRUE AND Admin IS NOT FALSE", &USER, &json!({})));
        assert!(!m("Admin IS TRUE", &USER, &json!({})));
    }
}
