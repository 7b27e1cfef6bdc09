//! A ChangeOrder's derived sets and State, computed on read with a bounded number of queries
//! whatever the number of Spaces: every set is one GROUP BY over the marks index.

use super::spaces::{parse_where, to_json};
use super::{OpError, Result};
use crate::changeorder::{DerivedSets, reduce_state};
use crate::model::{ChangeOrder, ChangeOrderType, ChangeOrderView, Filter, Invocation, Space, Unit};
use crate::store::{MarkKind, Tx};
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// The Spaces a Tag reached, and those of them where every revision it marks has been
/// released (that revision or a later one of the same Unit).
async fn reached_released(tx: &mut Tx, tag: Uuid) -> Result<(HashSet<Uuid>, HashSet<Uuid>)> {
    let counts = tx.reach_and_release(tag).await?;
    let reached = counts.keys().copied().collect();
    let released = counts.iter().filter(|(_, (_, unreleased))| *unreleased == 0).map(|(s, _)| *s).collect();
    Ok((reached, released))
}

/// For Invoke ChangeOrders: per in-scope Space, the Units the selection covers, asked now.
pub(crate) async fn covered_units(tx: &mut Tx, co: &ChangeOrder) -> Result<HashMap<Uuid, Vec<Unit>>> {
    let unit_where = parse_where("Unit", Some(&co.WhereUnit))?;
    let filter = match co.UnitFilterID {
        Some(id) => match tx.get::<Filter>(id).await? {
            Some(f) => parse_where("Unit", Some(&f.Where))?,
            None => {
                return Err(OpError::unprocessable(
                    "UnitFilter",
                    id.to_string(),
                    "the unit filter was deleted",
                ));
            }
        },
        None => None,
    };
    let toolchain = match co.InvocationID {
        Some(id) => tx.get::<Invocation>(id).await?.map(|i| i.ToolchainType).unwrap_or_default(),
        None => Default::default(),
    };
    let scope: HashSet<Uuid> = co.InScopeSpaceIDs.iter().copied().collect();
    let needs_space =
        [&unit_where, &filter].iter().any(|w| w.as_ref().is_some_and(|w| w.relations().contains(&"Space")));
    let spaces: HashMap<Uuid, Space> = if needs_space {
        tx.list::<Space>(None).await?.into_iter().map(|s| (s.SpaceID, s)).collect()
    } else {
        HashMap::new()
    };
    let mut out: HashMap<Uuid, Vec<Unit>> = HashMap::new();
    for u in tx.list::<Unit>(None).await? {
        if !scope.contains(&u.SpaceID) || u.ToolchainType != toolchain {
            continue;
        }
        let mut j = to_json(&u);
        if let Some(s) = spaces.get(&u.SpaceID) {
            j["Space"] = to_json(s);
        }
        if unit_where.as_ref().is_none_or(|w| w.matches(&j)) && filter.as_ref().is_none_or(|f| f.matches(&j))
        {
            out.entry(u.SpaceID).or_default().push(u);
        }
    }
    Ok(out)
}

/// The ChangeOrder with ResolvedSpaceIDs, ReleasedSpaceIDs, RestoredSpaceIDs,
/// ReleasedRestoredSpaceIDs and State derived from current marks.
pub async fn view_change_order(tx: &mut Tx, co: ChangeOrder) -> Result<ChangeOrderView> {
    let scope: HashSet<Uuid> = co.InScopeSpaceIDs.iter().copied().collect();
    let mut resolved: HashSet<Uuid> = HashSet::from([co.SpaceID]);
    let (reached, fully_released) = reached_released(tx, co.EndTagID).await?;
    match super::changeorders::co_link_type(co.UpdateType) {
        Some(t) => {
            let pending = tx.pending_links(co.EndTagID, t).await?;
            resolved.extend(
                scope.iter().filter(|s| reached.contains(s) && pending.get(s).copied().unwrap_or(0) == 0),
            );
        }
        None => {
            debug_assert_eq!(co.UpdateType, ChangeOrderType::Invoke);
            let covered = covered_units(tx, &co).await?;
            let taken: HashSet<Uuid> =
                tx.marked(MarkKind::Tag, co.EndTagID).await?.into_iter().map(|m| m.unit).collect();
            resolved.extend(scope.iter().filter(|s| {
                let units = covered.get(s).map(Vec::as_slice).unwrap_or(&[]);
                reached.contains(s) && units.iter().all(|u| taken.contains(&u.UnitID))
            }));
        }
    }
    let took: HashSet<Uuid> = resolved.iter().copied().filter(|s| *s != co.SpaceID).collect();
    let released_set: HashSet<Uuid> = took.intersection(&fully_released).copied().collect();
    let (restored, released_restored) = match co.RestoreTagID {
        Some(tag) => reached_released(tx, tag).await?,
        None => (HashSet::new(), HashSet::new()),
    };
    let sets = DerivedSets { resolved, released: released_set, restored, released_restored };
    let state = reduce_state(
        co.SpaceID,
        &co.InScopeSpaceIDs,
        &sets,
        !co.AbortedReason.is_empty(),
        co.RestoreTagID.is_some(),
    );
    let sorted = |s: &HashSet<Uuid>| {
        let mut v: Vec<Uuid> = s.iter().copied().collect();
        v.sort();
        v
    };
    Ok(ChangeOrderView {
        ResolvedSpaceIDs: sorted(&sets.resolved),
        ReleasedSpaceIDs: sorted(&sets.released),
        RestoredSpaceIDs: sorted(&sets.restored),
        ReleasedRestoredSpaceIDs: sorted(&sets.released_restored),
        State: state,
        Order: co,
    })
}
