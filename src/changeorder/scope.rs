//! Scope: where a ChangeOrder following Links can go, and the order it gets there, hop by hop.

use std::collections::{HashMap, HashSet, VecDeque};
use thiserror::Error;
use uuid::Uuid;

#[derive(Debug, Clone, Error, PartialEq)]
pub enum ScopeError {
    /// A Space in scope is reached only through one that is not.
    #[error(
        "space '{space}' is in scope but '{missing}', between the base and it, is not: a change moves hop by hop, so add '{missing}' to the scope or drop '{space}'"
    )]
    SkipsHop { space: String, missing: String },
    /// No Link path leads from the base to a Space in scope.
    #[error("space '{space}' is in scope but no link leads to it from the base space '{base}'")]
    Unreachable { space: String, base: String },
}

/// Downstream adjacency from `(downstream, upstream)` edges.
fn children(edges: &[(Uuid, Uuid)]) -> HashMap<Uuid, Vec<Uuid>> {
    let mut out: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
    for (down, up) in edges {
        out.entry(*up).or_default().push(*down);
    }
    for v in out.values_mut() {
        v.sort();
        v.dedup();
    }
    out
}

/// Every Space the Links reach from `base`, transitively, in breadth-first order (base excluded).
pub fn reach(base: Uuid, edges: &[(Uuid, Uuid)]) -> Vec<Uuid> {
    hop_order(base, edges, None)
}

/// The Spaces reachable from `base` through Spaces in `scope` only (all when `None`), in an
/// order where every Space comes after the one it takes from.
pub fn hop_order(base: Uuid, edges: &[(Uuid, Uuid)], scope: Option<&HashSet<Uuid>>) -> Vec<Uuid> {
    let kids = children(edges);
    let mut seen = HashSet::from([base]);
    let mut order = vec![];
    let mut queue = VecDeque::from([base]);
    while let Some(s) = queue.pop_front() {
        for k in kids.get(&s).into_iter().flatten() {
            if scope.is_some_and(|sc| !sc.contains(k)) || !seen.insert(*k) {
                continue;
            }
            order.push(*k);
            queue.push_back(*k);
        }
    }
    order
}

/// Refuses a scope that skips a Space between the base and a Space in it. `name` gives slugs.
pub fn check_hops(
    base: Uuid,
    scope: &[Uuid],
    edges: &[(Uuid, Uuid)],
    name: impl Fn(Uuid) -> String,
) -> Result<(), ScopeError> {
    let in_scope: HashSet<Uuid> = scope.iter().copied().collect();
    let reachable: HashSet<Uuid> = hop_order(base, edges, Some(&in_scope)).into_iter().collect();
    // Parents on shortest paths over the whole graph, to name the missing hop.
    let kids = children(edges);
    let mut parent: HashMap<Uuid, Uuid> = HashMap::new();
    let mut queue = VecDeque::from([base]);
    let mut seen = HashSet::from([base]);
    while let Some(s) = queue.pop_front() {
        for k in kids.get(&s).into_iter().flatten() {
            if seen.insert(*k) {
                parent.insert(*k, s);
                queue.push_back(*k);
            }
        }
    }
    for s in scope {
        if *s == base || reachable.contains(s) {
            continue;
        }
        if !parent.contains_key(s) {
            return Err(ScopeError::Unreachable { space: name(*s), base: name(base) });
        }
        let mut cur = parent[s];
        let mut missing = cur;
        while cur != base {
            if !in_scope.contains(&cur) {
                missing = cur;
            }
            cur = parent[&cur];
        }
        return Err(ScopeError::SkipsHop { space: name(*s), missing: name(missing) });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids<const N: usize>() -> [Uuid; N] {
        std::array::from_fn(|_| Uuid::new_v4())
    }

    #[test]
    fn chain_and_regions() {
        let [base, dev, stg, prod, eu, us] = ids();
        let edges = vec![(dev, base), (stg, dev), (prod, stg), (eu, prod), (us, prod)];
        let order = reach(base, &edges);
        assert_eq!(&order[..3], &[dev, stg, prod]);
        assert_eq!(order.len(), 5);
        let names = |s: Uuid| {
            [(base, "base"), (dev, "dev"), (stg, "staging"), (prod, "prod"), (eu, "eu"), (us, "us")]
                .iter()
                .find(|(i, _)| *i == s)
                .unwrap()
                .1
                .to_string()
        };
        assert!(check_hops(base, &[dev, stg, prod, eu, us], &edges, names).is_ok());
        assert!(check_hops(base, &[dev], &edges, names).is_ok());
        let e = check_hops(base, &[dev, prod], &edges, names).unwrap_err();
        assert_eq!(e, ScopeError::SkipsHop { space: "prod".into(), missing: "staging".into() });
        let e = check_hops(base, &[eu], &edges, names).unwrap_err();
        assert!(matches!(e, ScopeError::SkipsHop { ref missing, .. } if missing == "dev"), "{e}");
        let [stray] = ids();
        let e = check_hops(base, &[stray], &edges, |_| "x".into()).unwrap_err();
        assert!(matches!(e, ScopeError::Unreachable { .. }));
    }
}
