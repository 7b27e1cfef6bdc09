//! Document replacement: a child with `replacement: true` and the same `schema` and
//! `metadata.name` as its parent takes the parent's place. This module checks the rules
//! (the replacement seed's table) and builds the substitution-source map, in which a replaced
//! document's identity points at its replacement.
//!
//! Stricter than Deckhand where Deckhand is undefined (research note 12.11): a replaced
//! document that is itself a replacement is refused even when it is abstract, and two
//! replacements of one parent are refused (`reason: replaced-twice`).

use super::document::DocView;
use super::error::{LayeringError, ReplacementReason};
use std::collections::{HashMap, HashSet};

/// Checks replacement rules over the kept documents (input order); returns, per document, the
/// document that replaces it.
pub(crate) fn check(
    views: &[DocView<'_>],
    kept: &[usize],
    parents: &[Option<usize>],
) -> Result<Vec<Option<usize>>, LayeringError> {
    let fail = |i: usize, reason| {
        Err(LayeringError::InvalidDocumentReplacement { document: views[i].doc_ref().into(), reason })
    };
    let mut replaced_by = vec![None; views.len()];
    let mut non_replacements = HashSet::new();
    for &d in kept {
        let doc = &views[d];
        let parent = parents[d].map(|p| (p, &views[p]));
        let same_identity = parent.is_some_and(|(_, p)| p.schema == doc.schema && p.name == doc.name);
        if doc.is_replacement {
            let Some((p, _)) = parent else { return fail(d, ReplacementReason::WithoutParent) };
            if !same_identity {
                return fail(d, ReplacementReason::NameOrSchemaMismatch);
            }
            if replaced_by[p].is_some() {
                return fail(d, ReplacementReason::ReplacedTwice);
            }
            replaced_by[p] = Some(d);
        } else {
            if same_identity {
                return fail(d, ReplacementReason::NonReplacementSameNameAsParent);
            }
            if !doc.is_control && !non_replacements.insert((doc.schema, doc.name)) {
                return fail(d, ReplacementReason::DuplicateNameWithoutReplacement);
            }
        }
    }
    for &d in kept {
        if replaced_by[d].is_some() && views[d].is_replacement {
            return fail(d, ReplacementReason::ReplacementOfReplacement);
        }
    }
    Ok(replaced_by)
}

/// Substitution sources by (`schema`, `metadata.name`): concrete documents only, a replaced
/// document standing for its replacement.
pub(crate) fn sources<'a>(
    views: &[DocView<'a>],
    kept: &[usize],
    replaced_by: &[Option<usize>],
) -> HashMap<(&'a str, &'a str), usize> {
    let mut map = HashMap::new();
    for &d in kept {
        if !views[d].is_abstract {
            let target = replaced_by[d].unwrap_or(d);
            map.insert((views[target].schema, views[target].name), target);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn doc(name: &str, layer: &str, replacement: bool, is_abstract: bool) -> Value {
        json!({"schema": "a/Kind/v1", "metadata": {"schema": "metadata/Document/v1", "name": name,
            "replacement": replacement, "layeringDefinition": {"layer": layer, "abstract": is_abstract}}})
    }

    fn run(docs: &[Value], parents: &[Option<usize>]) -> Result<Vec<Option<usize>>, LayeringError> {
        let views: Vec<DocView> = docs.iter().map(|d| DocView::of(d).unwrap()).collect();
        let kept: Vec<usize> = (0..docs.len()).collect();
        check(&views, &kept, parents)
    }

    fn reason(r: Result<Vec<Option<usize>>, LayeringError>) -> &'static str {
        r.unwrap_err().reason_code().unwrap()
    }

    #[test]
    fn the_seed_table() {
        let g = doc("a", "global", false, false);
        let s = doc("a", "site", true, false);
        assert_eq!(run(&[g.clone(), s.clone()], &[None, Some(0)]).unwrap(), vec![Some(1), None]);
        let plain = doc("a", "site", false, false);
        assert_eq!(reason(run(&[g.clone(), plain], &[None, Some(0)])), "non-replacement-same-name-as-parent");
        assert_eq!(reason(run(&[g.clone(), s.clone()], &[None, None])), "replacement-without-parent");
        let renamed = doc("b", "site", true, false);
        assert_eq!(
            reason(run(&[g.clone(), renamed], &[None, Some(0)])),
            "replacement-name-or-schema-mismatch"
        );
        let r = doc("a", "region", true, true);
        let chain = run(&[g.clone(), r, s.clone()], &[None, Some(0), Some(1)]);
        assert_eq!(reason(chain), "replacement-of-replacement", "an abstract middle is refused too");
        let s2 = doc("a", "region", true, false);
        assert_eq!(reason(run(&[g, s, s2], &[None, Some(0), Some(0)])), "replaced-twice");
    }

    #[test]
    fn duplicate_identities_need_a_replacement() {
        let a = doc("a", "global", false, true);
        let b = doc("a", "site", false, true);
        assert_eq!(reason(run(&[a, b], &[None, None])), "duplicate-name-without-replacement");
    }

    #[test]
    fn sources_point_at_replacements_and_skip_abstract() {
        let docs =
            [doc("a", "global", false, false), doc("a", "site", true, false), doc("z", "site", false, true)];
        let views: Vec<DocView> = docs.iter().map(|d| DocView::of(d).unwrap()).collect();
        let map = sources(&views, &[0, 1, 2], &[Some(1), None, None]);
        assert_eq!(map.get(&("a/Kind/v1", "a")), Some(&1));
        assert_eq!(map.get(&("a/Kind/v1", "z")), None);
    }
}
