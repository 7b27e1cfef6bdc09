//! The LayeringPolicy, layer checks and parent selection.
//!
//! The first document whose `schema` starts with `deckhand/LayeringPolicy` gives `layerOrder`
//! (most general first). Every document with a layer must use one of those layers. A document
//! with a `parentSelector` takes as parent a document whose labels carry every selector pair,
//! from the closest higher layer that has one. As in Deckhand, any match must have the same
//! `schema` and sit in a strictly higher layer, else `InvalidDocumentParent` (even when another
//! match is fine), and two matches in any one layer are `IndeterminateDocumentParent`, even a
//! layer farther away than the chosen parent. Documents are indexed by label pair, so selection
//! looks only at documents carrying the rarest pair of the selector, once per distinct
//! selector.

use super::document::DocView;
use super::error::{LayeringError, ParentReason};
use serde_json::Value;
use std::collections::HashMap;

/// `layerOrder` of the first LayeringPolicy among `docs`.
pub(crate) fn layer_order(docs: &[Value]) -> Result<Vec<String>, LayeringError> {
    let policy = docs
        .iter()
        .find(|d| {
            d.get("schema").and_then(Value::as_str).is_some_and(|s| s.starts_with("deckhand/LayeringPolicy"))
        })
        .ok_or(LayeringError::LayeringPolicyNotFound)?;
    let malformed = |reason: &str| {
        let view = DocView::of(policy).map(|v| v.doc_ref()).unwrap_or_default();
        LayeringError::InvalidDocumentFormat {
            problems: vec![super::error::FormatProblem {
                document: view,
                path: "data.layerOrder".into(),
                reason: reason.into(),
            }],
        }
    };
    match policy.get("data").and_then(|d| d.get("layerOrder")) {
        None | Some(Value::Null) => Ok(vec![]),
        Some(Value::Array(layers)) => layers
            .iter()
            .map(|l| l.as_str().map(str::to_string).ok_or_else(|| malformed("layer names must be strings")))
            .collect(),
        Some(_) => Err(malformed("must be a list of layer names")),
    }
}

/// Fails with `InvalidDocumentLayer` at the first document (input order) whose layer is not in
/// `order`; returns each layer's rank (0 = most general).
pub(crate) fn check_layers<'a>(
    views: &[DocView<'a>],
    order: &'a [String],
) -> Result<HashMap<&'a str, usize>, LayeringError> {
    let mut rank = HashMap::new();
    for (i, l) in order.iter().enumerate() {
        rank.entry(l.as_str()).or_insert(i);
    }
    for v in views {
        if !v.layer.is_empty() && !rank.contains_key(v.layer) {
            return Err(LayeringError::InvalidDocumentLayer {
                document: v.doc_ref().into(),
                layer_order: order.to_vec(),
            });
        }
    }
    Ok(rank)
}

/// Hashable form of one label pair.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum LabelValue<'a> {
    Str(&'a str),
    Other(String),
}

fn label_value(v: &Value) -> LabelValue<'_> {
    match v {
        Value::String(s) => LabelValue::Str(s),
        other => LabelValue::Other(other.to_string()),
    }
}

/// Selects the parent of every kept document. `canonical[i]` is the first document with the
/// same identity as document `i` (so `canonical[i] == i` for kept documents); later copies
/// still count as candidates, as in Deckhand, but stand for their first copy.
pub(crate) fn parents(
    docs: &[Value],
    views: &[DocView<'_>],
    canonical: &[usize],
    rank: &HashMap<&str, usize>,
) -> Result<Vec<Option<usize>>, LayeringError> {
    let mut by_label: HashMap<(&str, LabelValue<'_>), Vec<usize>> = HashMap::new();
    for (i, v) in views.iter().enumerate() {
        if v.layer.is_empty() {
            continue;
        }
        for (k, val) in v.labels.into_iter().flatten() {
            by_label.entry((k.as_str(), label_value(val))).or_default().push(i);
        }
    }
    let mut satisfying: HashMap<Vec<(&str, LabelValue<'_>)>, Vec<usize>> = HashMap::new();
    let mut parents = vec![None; views.len()];
    let mut indeterminate = None;
    for (c, child) in views.iter().enumerate() {
        let (Some(selector), Some(&child_rank)) = (child.selector, rank.get(child.layer)) else { continue };
        if canonical[c] != c {
            continue;
        }
        // Documents satisfying a selector are computed once per distinct selector (siblings
        // usually share one), scanning only the rarest pair's posting list.
        let mut pairs: Vec<(&str, LabelValue<'_>)> =
            selector.iter().map(|(k, v)| (k.as_str(), label_value(v))).collect();
        pairs.sort();
        let candidates = satisfying.entry(pairs).or_insert_with_key(|pairs| {
            let postings: Option<Vec<&Vec<usize>>> =
                pairs.iter().map(|(k, v)| by_label.get(&(*k, v.clone()))).collect();
            let rarest = postings.and_then(|p| p.into_iter().min_by_key(|l| l.len()));
            rarest.into_iter().flatten().copied().filter(|&p| views[p].labels_satisfy(selector)).collect()
        });
        let mut per_rank: Vec<(usize, usize, usize)> = vec![]; // (rank, count, first candidate)
        for &p in candidates.iter() {
            let same_doc = p == c || (canonical[p] == c && docs[p] == docs[c]);
            let cand = &views[p];
            if same_doc {
                continue;
            }
            let reason = if cand.schema != child.schema {
                Some(ParentReason::SchemaMismatch)
            } else if rank[cand.layer] >= child_rank {
                Some(ParentReason::LayerNotHigher)
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(LayeringError::InvalidDocumentParent {
                    document: child.doc_ref().into(),
                    parent: cand.doc_ref().into(),
                    reason,
                });
            }
            match per_rank.iter_mut().find(|(r, _, _)| *r == rank[cand.layer]) {
                Some(entry) => entry.1 += 1,
                None => per_rank.push((rank[cand.layer], 1, p)),
            }
        }
        if let Some(&(_, found, _)) = per_rank.iter().find(|(_, n, _)| *n > 1) {
            indeterminate.get_or_insert(LayeringError::IndeterminateDocumentParent {
                document: child.doc_ref().into(),
                found,
            });
        }
        parents[c] = per_rank.iter().max_by_key(|(r, _, _)| *r).map(|&(_, _, p)| canonical[p]);
    }
    // Deckhand reports every InvalidDocumentParent before any IndeterminateDocumentParent.
    match indeterminate {
        Some(e) => Err(e),
        None => Ok(parents),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(name: &str, layer: &str, labels: Value, selector: Value) -> Value {
        json!({"schema": "a/Kind/v1", "metadata": {"schema": "metadata/Document/v1", "name": name,
            "labels": labels, "layeringDefinition": {"layer": layer, "parentSelector": selector,
            "actions": [{"method": "merge", "path": "."}]}}, "data": {}})
    }

    fn select(docs: &[Value]) -> Result<Vec<Option<usize>>, LayeringError> {
        let order: Vec<String> = ["global", "region", "site"].iter().map(|s| s.to_string()).collect();
        let views: Vec<DocView> = docs.iter().map(|d| DocView::of(d).unwrap()).collect();
        let rank = check_layers(&views, &order)?;
        let canonical: Vec<usize> = (0..docs.len()).collect();
        parents(docs, &views, &canonical, &rank)
    }

    #[test]
    fn nearest_layer_wins_and_grandparents_are_a_fallback() {
        let g = doc("g", "global", json!({"app": "x"}), json!({}));
        let r = doc("r", "region", json!({"app": "x"}), json!({}));
        let s = doc("s", "site", json!({}), json!({"app": "x"}));
        assert_eq!(select(&[g.clone(), r, s.clone()]).unwrap()[2], Some(1));
        assert_eq!(select(&[s, g]).unwrap()[0], Some(1));
    }

    #[test]
    fn every_selector_pair_must_match() {
        let g = doc("g", "global", json!({"a": "1", "b": "2"}), json!({}));
        let ok = doc("s", "site", json!({}), json!({"a": "1"}));
        let superset = doc("t", "site", json!({}), json!({"a": "1", "c": "3"}));
        assert_eq!(select(&[g, ok, superset]).unwrap(), vec![None, Some(0), None]);
    }

    #[test]
    fn bad_matches_are_errors() {
        let g = doc("g", "global", json!({"a": "1"}), json!({}));
        let same_layer = doc("h", "global", json!({}), json!({"a": "1"}));
        let e = select(&[g.clone(), same_layer]).unwrap_err();
        assert_eq!(e.reason_code(), Some("parent-layer-not-higher"));
        let mut other = doc("o", "global", json!({"a": "1"}), json!({}));
        other["schema"] = json!("b/Other/v1");
        let s = doc("s", "site", json!({}), json!({"a": "1"}));
        let e = select(&[g.clone(), other, s.clone()]).unwrap_err();
        assert_eq!(e.reason_code(), Some("parent-schema-mismatch"));
        let g2 = doc("g2", "global", json!({"a": "1"}), json!({}));
        let r = doc("r", "region", json!({"a": "1"}), json!({}));
        let e = select(&[g, g2, r, s]).unwrap_err();
        assert_eq!(e.class(), "IndeterminateDocumentParent", "ambiguity in a farther layer still counts");
    }

    #[test]
    fn the_policy_gives_the_order() {
        let p = json!({"schema": "deckhand/LayeringPolicy/v1", "metadata": {"name": "p"},
            "data": {"layerOrder": ["global", "site"]}});
        assert_eq!(layer_order(&[json!({"schema": "x/Y/v1"}), p]).unwrap(), vec!["global", "site"]);
        assert_eq!(layer_order(&[]).unwrap_err().class(), "LayeringPolicyNotFound");
        let bad = json!({"schema": "deckhand/LayeringPolicy/v1", "data": {"layerOrder": "global"}});
        assert_eq!(layer_order(&[bad]).unwrap_err().class(), "InvalidDocumentFormat");
    }
}
