//! Reducing a ChangeOrder's derived sets to one word.

use crate::model::ChangeOrderState;
use std::collections::HashSet;
use uuid::Uuid;

/// The derived sets (base Space included in `resolved`).
#[derive(Debug, Clone, Default)]
pub struct DerivedSets {
    pub resolved: HashSet<Uuid>,
    pub released: HashSet<Uuid>,
    pub restored: HashSet<Uuid>,
    pub released_restored: HashSet<Uuid>,
}

/// State exactly as the seed defines it: New until a Space other than its own has taken it,
/// InProgress while some in scope have and some have not, Resolved once every Space in scope
/// has, Released once every one has released what it took. Aborted overrides all of it, and
/// the undoing overrides that with Restored and RestoreReleased.
pub fn reduce_state(
    base: Uuid,
    scope: &[Uuid],
    sets: &DerivedSets,
    aborted: bool,
    undone: bool,
) -> ChangeOrderState {
    let took: Vec<Uuid> = sets.resolved.iter().copied().filter(|s| *s != base).collect();
    if undone && !took.is_empty() && took.iter().all(|s| sets.restored.contains(s)) {
        return if took.iter().all(|s| sets.released_restored.contains(s)) {
            ChangeOrderState::RestoreReleased
        } else {
            ChangeOrderState::Restored
        };
    }
    if aborted || undone {
        return ChangeOrderState::Aborted;
    }
    let targets: Vec<Uuid> = scope.iter().copied().filter(|s| *s != base).collect();
    if took.is_empty() {
        return ChangeOrderState::New;
    }
    if !targets.iter().all(|s| sets.resolved.contains(s)) {
        return ChangeOrderState::InProgress;
    }
    if targets.iter().all(|s| sets.released.contains(s)) {
        ChangeOrderState::Released
    } else {
        ChangeOrderState::Resolved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChangeOrderState::*;

    #[test]
    fn the_seed_states() {
        let (base, a, b) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let scope = [a, b];
        let mut s = DerivedSets { resolved: HashSet::from([base]), ..Default::default() };
        assert_eq!(reduce_state(base, &scope, &s, false, false), New);
        s.resolved.insert(a);
        assert_eq!(reduce_state(base, &scope, &s, false, false), InProgress);
        s.resolved.insert(b);
        assert_eq!(reduce_state(base, &scope, &s, false, false), Resolved);
        s.released.insert(a);
        assert_eq!(reduce_state(base, &scope, &s, false, false), Resolved);
        s.released.insert(b);
        assert_eq!(reduce_state(base, &scope, &s, false, false), Released);
        assert_eq!(reduce_state(base, &scope, &s, true, false), Aborted);
        s.restored.insert(a);
        assert_eq!(reduce_state(base, &scope, &s, true, true), Aborted, "partly undone");
        s.restored.insert(b);
        assert_eq!(reduce_state(base, &scope, &s, true, true), Restored);
        s.released_restored.extend([a, b]);
        assert_eq!(reduce_state(base, &scope, &s, true, true), RestoreReleased);
    }
}
