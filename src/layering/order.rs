//! Processing order: a document renders after its parent and after every substitution source,
//! so each one reads fully rendered values whatever the input order. When a parent is
//! replaced, its other children wait for the replacement (they layer onto its result) while
//! the replacement itself waits for the parent. A cycle, a document substituting from itself
//! included, is `SubstitutionDependencyCycle`.

/// Orders the nodes so that every node follows its dependencies (`deps[n]`); ties keep input
/// order. On a cycle, returns its members in dependency order instead.
pub(crate) fn topological(deps: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    const NEW: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; deps.len()];
    let mut out = Vec::with_capacity(deps.len());
    // Iterative depth-first search: (node, next dependency to visit).
    let mut stack: Vec<(usize, usize)> = vec![];
    for root in 0..deps.len() {
        if state[root] != NEW {
            continue;
        }
        state[root] = OPEN;
        stack.push((root, 0));
        while let Some(&(node, next)) = stack.last() {
            if let Some(&dep) = deps[node].get(next) {
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                }
                match state[dep] {
                    NEW => {
                        state[dep] = OPEN;
                        stack.push((dep, 0));
                    }
                    OPEN => {
                        let from = stack.iter().position(|(n, _)| *n == dep).unwrap_or(0);
                        return Err(stack[from..].iter().map(|(n, _)| *n).collect());
                    }
                    _ => {}
                }
            } else {
                state[node] = DONE;
                out.push(node);
                stack.pop();
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_come_first() {
        // 0 needs 2, 2 needs 1.
        let order = topological(&[vec![2], vec![], vec![1]]).unwrap();
        let pos = |n| order.iter().position(|x| *x == n).unwrap();
        assert!(pos(1) < pos(2) && pos(2) < pos(0));
        assert_eq!(order.len(), 3);
    }

    #[test]
    fn cycles_are_reported_with_their_members() {
        assert_eq!(topological(&[vec![0]]).unwrap_err(), vec![0]);
        let cycle = topological(&[vec![1], vec![2], vec![0], vec![]]).unwrap_err();
        assert_eq!(cycle, vec![0, 1, 2]);
    }

    #[test]
    fn long_chains_do_not_recurse() {
        let n = 100_000;
        let deps: Vec<Vec<usize>> = (0..n).map(|i| if i + 1 < n { vec![i + 1] } else { vec![] }).collect();
        let order = topological(&deps).unwrap();
        assert_eq!(order[0], n - 1);
    }
}
