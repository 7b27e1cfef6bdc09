//! ConfigHub-style where expressions: this module owns parsing a `where` string against an
//! entity's allow-list ([`attrs`]) and evaluating it over that entity's JSON object. It does
//! no I/O and knows nothing about storage: callers serialize the entity (PascalCase keys),
//! attach any relations the expression names (see [`WhereExpr::relations`]) as nested
//! objects, and call [`WhereExpr::matches`].
//!
//! The language is a flat conjunction `clause AND clause ...` (no `OR`, no parentheses, no
//! `NOT` of a clause) of comparisons, `LIKE`/regex matches, `IN` lists, `?` (array contains),
//! `IS [NOT] NULL` and `IS [NOT] TRUE|FALSE` truth tests, with SQL three-valued logic: a
//! comparison with a null or missing side is UNKNOWN, and an expression matches only when
//! every clause is TRUE.
#![warn(missing_docs)]

mod ast;
pub mod attrs;
mod eval;
mod lexer;
mod parser;
mod path;
#[cfg(test)]
mod testgen;

use std::fmt;

use serde_json::Value;

use self::ast::{Clause, Operand, Predicate, Rhs};
use self::attrs::Entity;

/// Longest accepted expression, in characters.
pub const MAX_EXPR_CHARS: usize = 4096;
/// Longest accepted string literal content, in characters.
pub const MAX_STRING_CHARS: usize = 255;
/// Most digits in an integer literal.
pub const MAX_INT_DIGITS: usize = 18;

/// Why a where expression was rejected, pointing at the offending token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid where expression at column {column} {}: {message}", near(.token))]
pub struct QueryError {
    /// What is wrong.
    pub message: String,
    /// 1-based character column of the offending token (newlines count as one character).
    pub column: usize,
    /// The offending token as written (shortened when long; empty at end of input).
    pub token: String,
}

fn near(token: &str) -> String {
    if token.is_empty() { "at end of expression".to_string() } else { format!("near '{token}'") }
}

impl QueryError {
    pub(crate) fn new(column: usize, token: &str, message: impl Into<String>) -> QueryError {
        const MAX: usize = 40;
        let token = if token.chars().count() > MAX {
            let mut t: String = token.chars().take(MAX).collect();
            t.push_str("...");
            t
        } else {
            token.to_string()
        };
        QueryError { message: message.into(), column, token }
    }
}

/// A parsed, type-checked where expression for one entity kind.
#[derive(Clone, Debug)]
pub struct WhereExpr {
    src: String,
    entity: &'static Entity,
    clauses: Vec<Clause>,
}

impl WhereExpr {
    /// Parses `src` against `entity`'s allow-list. Empty or whitespace-only text matches
    /// everything. Regexes and `LIKE` patterns are compiled here.
    pub fn parse(src: &str, entity: &'static Entity) -> Result<WhereExpr, QueryError> {
        let clauses = parser::parse(src, entity)?;
        Ok(WhereExpr { src: src.to_string(), entity, clauses })
    }

    /// Evaluates the expression over the entity's JSON object: true when every clause is
    /// TRUE (a missing key or JSON null makes a comparison UNKNOWN, which does not match).
    pub fn matches(&self, value: &Value) -> bool {
        self.clauses.iter().all(|c| eval::clause(c, value) == eval::Tri::True)
    }

    /// Relation roots the expression reads (e.g. `["Space", "UpstreamUnit"]`), in order of
    /// first use, without duplicates; callers attach each as a nested object before matching.
    pub fn relations(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for c in &self.clauses {
            let lhs = match &c.lhs {
                Operand::Attr(p) | Operand::Len(p) => p,
            };
            let rhs = match &c.pred {
                Predicate::Compare(_, Rhs::Attr(p)) => Some(p),
                _ => None,
            };
            for rel in std::iter::once(lhs).chain(rhs).filter_map(|p| p.relation) {
                if !out.contains(&rel) {
                    out.push(rel);
                }
            }
        }
        out
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.src
    }

    /// The entity kind the expression was parsed for.
    pub fn entity(&self) -> &'static Entity {
        self.entity
    }

    /// True when the expression has no clauses (matches everything).
    pub fn is_empty(&self) -> bool {
        self.clauses.is_empty()
    }
}

impl fmt::Display for WhereExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.src)
    }
}

/// Equal when parsed for the same entity from the same text.
impl PartialEq for WhereExpr {
    fn eq(&self, other: &Self) -> bool {
        self.entity.name == other.entity.name && self.src == other.src
    }
}

impl Eq for WhereExpr {}

#[cfg(test)]
mod tests {
    use super::attrs::{REVISION, SPACE, UNIT};
    use super::testgen::{KEYS, Picks, UUIDS, candidates, gen_clause};
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const U1: &str = "6f1c2a34-0000-4000-8000-00000000000a";
    const U2: &str = "6f1c2a34-0000-4000-8000-00000000000b";

    fn expr(src: &str, e: &'static Entity) -> WhereExpr {
        WhereExpr::parse(src, e).unwrap_or_else(|err| panic!("{src:?}: {err}"))
    }

    /// Asserts `src` matches `yes` and not `no`.
    fn yes_no(src: &str, e: &'static Entity, yes: Value, no: Value) {
        let x = expr(src, e);
        assert!(x.matches(&yes), "{src} should match {yes}");
        assert!(!x.matches(&no), "{src} should not match {no}");
    }

    /// A Unit as the store would serialize it, with relations attached.
    fn unit() -> Value {
        json!({
            "UnitID": U1, "SpaceID": U2, "Slug": "backend", "DisplayName": "Backend",
            "Labels": {"Environment": "prod", "Stage": "staging", "mykey": "myvalue",
                       "app.kubernetes.io/name": "api"},
            "Annotations": {}, "ToolchainType": "Kubernetes/YAML", "HeadRevisionNum": 7,
            "HeadRevisionID": U1, "DataHash": "abc", "DataSize": 120,
            "LastChangeDescription": "bump", "UpstreamUnitID": U2, "UpstreamSpaceID": U2,
            "UpstreamRevisionNum": 3, "LastReleasedRevisionNum": 5, "TargetID": null,
            "Conflicts": [{"Resource": "Deployment/api", "Path": "spec.replicas",
                           "Reason": "ProtectedPath", "UpstreamRevisionNum": 4}],
            "ValidationErrors": [], "ProtectedPaths": [],
            "Version": 9, "CreatedAt": "2025-01-08T09:00:00Z", "UpdatedAt": "2025-02-01T00:00:00Z",
            "Space": {"SpaceID": U2, "Slug": "prod-eu", "Labels": {"Environment": "prod"}},
            "UpstreamUnit": {"UnitID": U2, "Slug": "backend", "HeadRevisionNum": 4}
        })
    }

    /// `unit()` with `path` (a JSON pointer) replaced by `v`.
    fn unit_with(path: &str, v: Value) -> Value {
        let mut u = unit();
        *u.pointer_mut(path).unwrap_or_else(|| panic!("{path}")) = v;
        u
    }

    #[test]
    fn examples_label_and_space_label() {
        yes_no("Labels.Environment = 'prod'", &UNIT, unit(), unit_with("/Labels/Environment", json!("dev")));
        yes_no("Space.Labels.Environment = 'prod'", &UNIT, unit(), unit_with("/Space/Labels", json!({})));
        yes_no("Labels.Stage = 'staging'", &UNIT, unit(), unit_with("/Labels/Stage", json!("prod")));
        yes_no("Labels.app.kubernetes.io/name = 'api'", &UNIT, unit(), unit_with("/Labels", json!({})));
        let space = json!({"Slug": "dev", "Labels": {"Environment": "prod"}});
        yes_no("Labels.Environment = 'prod'", &SPACE, space, json!({"Labels": {"environment": "prod"}}));
    }

    #[test]
    fn examples_in_and_regex() {
        yes_no("Slug IN ('a','b')", &UNIT, unit_with("/Slug", json!("b")), unit());
        yes_no(
            "Labels.Environment NOT IN ('dev','test')",
            &UNIT,
            unit(),
            unit_with("/Labels/Environment", json!("test")),
        );
        // A missing label is neither in nor not in the list.
        assert!(
            !expr("Labels.Environment NOT IN ('dev','test')", &UNIT)
                .matches(&unit_with("/Labels", json!({})))
        );
        yes_no(
            "Slug ~ '^app-[0-9]+$'",
            &UNIT,
            unit_with("/Slug", json!("app-42")),
            unit_with("/Slug", json!("app-4x")),
        );
    }

    #[test]
    fn example_created_at_conjunction() {
        let src = "CreatedAt >= '2025-01-07' AND Slug = 'test' AND Labels.mykey = 'myvalue'";
        let yes = unit_with("/Slug", json!("test"));
        let mut old = yes.clone();
        old["CreatedAt"] = json!("2025-01-06T23:00:00Z");
        yes_no(src, &UNIT, yes.clone(), old);
        yes_no(src, &UNIT, yes, unit());
    }

    #[test]
    fn examples_arrays_and_len() {
        // ApprovedBy is not on these allow-lists; Revision Tags play its part.
        let rev = json!({"SpaceID": U2, "RevisionNum": 2, "Tags": [U1], "ValidationErrors": []});
        let untagged = json!({"SpaceID": U2, "Tags": []});
        yes_no("LEN(Tags) > 0", &REVISION, rev.clone(), untagged.clone());
        yes_no(&format!("Tags ? '{U1}'"), &REVISION, rev.clone(), untagged.clone());
        yes_no(
            &format!("SpaceID = '{U2}' AND Tags ? '{U1}'"),
            &REVISION,
            rev.clone(),
            json!({"SpaceID": U1, "Tags": [U1]}),
        );
        let err = WhereExpr::parse("LEN(ApprovedBy) > 0", &UNIT).unwrap_err();
        assert_eq!(err.column, 5);
        let bad = json!([{"Source": "schema", "Message": "replicas must be > 0"}]);
        yes_no("LEN(ValidationErrors) > 0", &UNIT, unit_with("/ValidationErrors", bad), unit());
    }

    #[test]
    fn examples_revision_numbers() {
        yes_no(
            "HeadRevisionNum > LastReleasedRevisionNum",
            &UNIT,
            unit(),
            unit_with("/LastReleasedRevisionNum", json!(7)),
        );
        yes_no("LastReleasedRevisionNum = 0", &UNIT, unit_with("/LastReleasedRevisionNum", json!(0)), unit());
        yes_no("UpstreamRevisionNum > 0", &UNIT, unit(), unit_with("/UpstreamRevisionNum", json!(0)));
        let src = "Unit.UpstreamRevisionNum < UpstreamUnit.HeadRevisionNum";
        yes_no(src, &UNIT, unit(), unit_with("/UpstreamUnit/HeadRevisionNum", json!(3)));
        let mut no_upstream = unit();
        no_upstream.as_object_mut().unwrap().remove("UpstreamUnit");
        assert!(!expr(src, &UNIT).matches(&no_upstream));
    }

    #[test]
    fn examples_relations_and_conflicts() {
        let src = "UpstreamUnit.Slug = 'backend' AND Space.Labels.Environment = 'prod'";
        yes_no(src, &UNIT, unit(), unit_with("/UpstreamUnit/Slug", json!("frontend")));
        yes_no(src, &UNIT, unit(), unit_with("/Space/Labels/Environment", json!("dev")));
        yes_no("Conflicts.*.Reason = 'ProtectedPath'", &UNIT, unit(), unit_with("/Conflicts", json!([])));
        // FromLink and MergeSourceID are not on the Unit allow-list here.
        assert_eq!(WhereExpr::parse("FromLink.*.Slug = 'upgrade-app'", &UNIT).unwrap_err().token, "FromLink");
        assert_eq!(
            WhereExpr::parse(&format!("MergeSourceID = '{U1}' IS NOT FALSE"), &UNIT).unwrap_err().column,
            1
        );
    }

    #[test]
    fn examples_nullable() {
        let src = format!("TargetID = '{U1}' IS NOT FALSE");
        yes_no(&src, &UNIT, unit(), unit_with("/TargetID", json!(U2)));
        assert!(expr(&src, &UNIT).matches(&unit_with("/TargetID", json!(U1.to_uppercase()))));
        yes_no("TargetID IS NOT NULL", &UNIT, unit_with("/TargetID", json!(U1)), unit());
        yes_no("UpstreamUnitID IS NOT NULL", &UNIT, unit(), unit_with("/UpstreamUnitID", json!(null)));
        yes_no("Labels.tier IS NULL", &UNIT, unit(), unit_with("/Labels", json!({"tier": "web"})));
        yes_no("Labels.Stage IS NOT NULL", &UNIT, unit(), unit_with("/Labels", json!({})));
    }

    #[test]
    fn api() {
        let x = expr(
            "Space.Slug = 'a' AND UpstreamUnit.Slug = Space.Slug AND Slug = 'x' AND LEN(Space.Labels) > 0",
            &UNIT,
        );
        assert_eq!(x.relations(), vec!["Space", "UpstreamUnit"]);
        let x = expr("HeadRevisionNum > UpstreamUnit.HeadRevisionNum", &UNIT);
        assert_eq!(x.relations(), vec!["UpstreamUnit"]);
        assert!(expr("Unit.Slug = 'a'", &UNIT).relations().is_empty());
        let src = "Slug  =  'a'";
        let x = expr(src, &UNIT);
        assert_eq!((x.as_str(), x.to_string().as_str()), (src, src));
        assert_eq!(x.entity().name, "Unit");
        assert_eq!(x.clone(), x);
        assert_ne!(x, expr(src, &SPACE));
        for blank in ["", "  \n\t"] {
            let all = expr(blank, &UNIT);
            assert!(all.is_empty() && all.matches(&json!({})) && all.matches(&unit()));
        }
        assert_eq!(attrs::entity("Unit").map(|e| e.name), Some("Unit"));
        let e: Box<dyn std::error::Error> = Box::new(WhereExpr::parse("x", &UNIT).unwrap_err());
        assert!(e.to_string().contains("column 1 near 'x'"));
    }

    // ---- property (3): a AND b matches exactly when both match ----

    const STRS: &[&str] =
        &["", "a", "b", "app-1", "prod", "2025-01-07", "2025-01-07T10:00:00Z", "ProtectedPath"];
    const INTS: &[i64] = &[-1, 0, 1, 2, 5];

    /// A random JSON object for `e` drawn from the same small pools as the literals.
    fn gen_json(e: &Entity, p: &mut Picks, nested: bool) -> Value {
        let mut obj = serde_json::Map::new();
        for a in e.attrs {
            if p.pick(5) == 0 {
                continue; // missing
            }
            let v = gen_value(a.ty, p, nested);
            if p.pick(8) == 0 || v.is_null() {
                obj.insert(a.name.to_string(), Value::Null);
            } else {
                obj.insert(a.name.to_string(), v);
            }
        }
        Value::Object(obj)
    }

    fn gen_value(ty: attrs::AttrType, p: &mut Picks, nested: bool) -> Value {
        use attrs::AttrType as T;
        match ty {
            T::String | T::Time => json!(p.str()),
            T::Int => json!(p.int()),
            T::Bool => json!(p.pick(2) == 0),
            T::Uuid | T::NullableUuid => json!(UUIDS[p.pick(UUIDS.len())]),
            T::Map => {
                let keys = KEYS;
                let n = p.pick(keys.len() + 1);
                Value::Object(keys[..n].iter().map(|k| (k.to_string(), json!(p.str()))).collect())
            }
            T::Array(elem) => Value::Array((0..p.pick(3)).map(|_| gen_value(*elem, p, nested)).collect()),
            T::ObjectArray(fields) => {
                let fake = Entity { name: "element", self_qualifier: false, attrs: fields };
                Value::Array((0..p.pick(3)).map(|_| gen_json(&fake, p, true)).collect())
            }
            T::Relation(target) if !nested => gen_json(target, p, true),
            T::Relation(_) => Value::Null,
        }
    }

    fn pools() -> (Vec<String>, Vec<i64>) {
        (STRS.iter().map(|s| s.to_string()).collect(), INTS.to_vec())
    }

    /// Two clauses and an entity from one list of choices.
    fn case(nums: &[u32], strs: &[String], ints: &[i64]) -> (String, String, Value) {
        let mut p = Picks::new(nums, strs, ints);
        let cands = candidates(&UNIT);
        let a = gen_clause(&cands[p.pick(cands.len())], &cands, &mut p).1;
        let b = gen_clause(&cands[p.pick(cands.len())], &cands, &mut p).1;
        (a, b, gen_json(&UNIT, &mut p, false))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn conjunction_matches_when_both_match(nums in prop::collection::vec(any::<u32>(), 8..96)) {
            let (strs, ints) = pools();
            let (a, b, v) = case(&nums, &strs, &ints);
            let both = expr(&format!("{a} AND {b}"), &UNIT).matches(&v);
            prop_assert_eq!(both, expr(&a, &UNIT).matches(&v) && expr(&b, &UNIT).matches(&v));
        }
    }

    /// The property above is not vacuous: generated clauses match generated units often
    /// enough, and conjunctions sometimes match too.
    #[test]
    fn generated_cases_do_match() {
        let (strs, ints) = pools();
        let (mut single, mut both, mut seed) = (0, 0, 0x2545_f491_u64);
        for _ in 0..2000 {
            let nums: Vec<u32> = (0..64)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (seed >> 33) as u32
                })
                .collect();
            let (a, b, v) = case(&nums, &strs, &ints);
            single += usize::from(expr(&a, &UNIT).matches(&v));
            both += usize::from(expr(&format!("{a} AND {b}"), &UNIT).matches(&v));
        }
        assert!(single > 300 && both > 50, "single {single}, both {both}");
    }
}
