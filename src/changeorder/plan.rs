//! Planning a promotion into one Space: a pure function of a snapshot of that Space and the
//! Space it takes from. The plan is what `--dry-run` shows and what its digest pins.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;
use uuid::Uuid;

/// A Unit of the Space the target takes from.
#[derive(Debug, Clone)]
pub struct UpstreamUnit {
    pub id: Uuid,
    pub slug: String,
    /// The change's interval in this Unit's own revisions, `None` when the change does not
    /// cover it.
    pub interval: Option<(i64, i64)>,
    /// Created after the ChangeOrder was fixed (only meaningful in the base Space).
    pub created_after: bool,
}

/// A Unit of the target Space.
#[derive(Debug, Clone)]
pub struct DownstreamUnit {
    pub id: Uuid,
    pub slug: String,
    pub head: i64,
    /// Already carries the end Tag.
    pub taken: bool,
    /// The Link of the ChangeOrder's type it takes through: (upstream Unit, cursor).
    pub link: Option<(Uuid, i64)>,
    /// For a Unit with no such Link (made by the variant for itself): the cursors of the Links
    /// other Spaces take it through.
    pub downstream_cursors: Vec<i64>,
}

/// What the planner sees.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub upstream: Vec<UpstreamUnit>,
    pub downstream: Vec<DownstreamUnit>,
    /// Whether Units the target lacks are cloned (UpgradeUnit ChangeOrders).
    pub clones: bool,
}

/// Why a Unit is passed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SkipReason {
    AlreadyTaken,
    NotCovered,
    CreatedAfterChangeOrder,
}

/// What happens to one Unit.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "Outcome")]
pub enum Outcome {
    /// Merge the upstream's (From, To] into the Unit.
    Upgrade {
        From: i64,
        To: i64,
    },
    /// Clone the upstream at `At` (0: at `To` directly), then merge (At, To].
    Clone {
        At: i64,
        To: i64,
    },
    /// Nothing to merge: the start Tag on `Start`, the end Tag on the head.
    Mark {
        Start: i64,
    },
    /// Run the ChangeOrder's Invocation.
    Invoke,
    Skip {
        Reason: SkipReason,
    },
}

/// One Unit's line of the plan.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitPlan {
    pub Unit: String,
    /// The target's Unit (absent for a clone, which does not exist yet).
    pub UnitID: Option<Uuid>,
    pub UpstreamUnitID: Option<Uuid>,
    /// The target Unit's head when planned: a plan is stale once it moves.
    pub HeadRevisionNum: i64,
    #[serde(flatten)]
    pub Outcome: Outcome,
}

/// A promotion plan for one Space, and its digest.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub Units: Vec<UnitPlan>,
    pub Digest: String,
}

impl Plan {
    /// Units the plan changes (every outcome but Skip).
    pub fn changed(&self) -> usize {
        self.Units.iter().filter(|u| !matches!(u.Outcome, Outcome::Skip { .. })).count()
    }
}

#[derive(Debug, Clone, Error, PartialEq)]
pub enum PlanError {
    #[error(
        "unit '{unit}' has taken upstream revision {cursor}, but the change starts after {start}: promote what comes before it first (or without a ChangeOrder)"
    )]
    NotAtStart { unit: String, cursor: i64, start: i64 },
    #[error("cannot clone upstream unit '{unit}': the space already has its own unit with that slug")]
    SlugTaken { unit: String },
}

/// Plans the promotion. Clones come first, then the Units the target has, by slug.
pub fn plan_promotion(s: &Snapshot) -> Result<Plan, PlanError> {
    let mut clones = vec![];
    let mut rest = vec![];
    let linked: std::collections::HashSet<Uuid> =
        s.downstream.iter().filter_map(|d| d.link.map(|l| l.0)).collect();
    for up in &s.upstream {
        if linked.contains(&up.id) || !s.clones {
            continue;
        }
        let Some((start, end)) = up.interval else { continue };
        if s.downstream.iter().any(|d| d.slug == up.slug) {
            return Err(PlanError::SlugTaken { unit: up.slug.clone() });
        }
        clones.push(UnitPlan {
            Unit: up.slug.clone(),
            UnitID: None,
            UpstreamUnitID: Some(up.id),
            HeadRevisionNum: 0,
            Outcome: Outcome::Clone { At: start, To: end },
        });
    }
    for d in &s.downstream {
        let outcome = if d.taken {
            Outcome::Skip { Reason: SkipReason::AlreadyTaken }
        } else if let Some((up_id, cursor)) = d.link {
            match s.upstream.iter().find(|u| u.id == up_id) {
                Some(u) if u.interval.is_none() && u.created_after => {
                    Outcome::Skip { Reason: SkipReason::CreatedAfterChangeOrder }
                }
                None | Some(UpstreamUnit { interval: None, .. }) => {
                    Outcome::Skip { Reason: SkipReason::NotCovered }
                }
                Some(UpstreamUnit { interval: Some((start, end)), .. }) => {
                    if cursor < *start {
                        return Err(PlanError::NotAtStart { unit: d.slug.clone(), cursor, start: *start });
                    }
                    if cursor >= *end {
                        Outcome::Mark { Start: d.head }
                    } else {
                        Outcome::Upgrade { From: cursor, To: *end }
                    }
                }
            }
        } else {
            // A Unit the variant made for itself: its start is what its downstreams have taken.
            let start = d.downstream_cursors.iter().copied().min().unwrap_or(d.head).min(d.head);
            Outcome::Mark { Start: start }
        };
        rest.push(UnitPlan {
            Unit: d.slug.clone(),
            UnitID: Some(d.id),
            UpstreamUnitID: d.link.map(|l| l.0),
            HeadRevisionNum: d.head,
            Outcome: outcome,
        });
    }
    rest.sort_by(|a, b| a.Unit.cmp(&b.Unit));
    clones.sort_by(|a, b| a.Unit.cmp(&b.Unit));
    clones.extend(rest);
    Ok(Plan { Digest: digest(&clones), Units: clones })
}

/// A stable digest of the plan's lines.
pub fn digest(units: &[UnitPlan]) -> String {
    let bytes = serde_json::to_vec(units).expect("plans serialize");
    hex::encode(Sha256::digest(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(slug: &str, interval: Option<(i64, i64)>) -> UpstreamUnit {
        UpstreamUnit { id: Uuid::new_v4(), slug: slug.into(), interval, created_after: false }
    }

    fn down(slug: &str, head: i64, link: Option<(Uuid, i64)>, taken: bool) -> DownstreamUnit {
        DownstreamUnit {
            id: Uuid::new_v4(),
            slug: slug.into(),
            head,
            taken,
            link,
            downstream_cursors: vec![],
        }
    }

    #[test]
    fn outcomes() {
        let web = up("web", Some((3, 5)));
        let db = up("db", Some((2, 2)));
        let cache = up("cache", Some((1, 4)));
        let mut late = up("late", None);
        late.created_after = true;
        let s = Snapshot {
            upstream: vec![web.clone(), db.clone(), cache.clone(), late.clone()],
            downstream: vec![
                down("web", 7, Some((web.id, 3)), false),
                down("db", 2, Some((db.id, 2)), false),
                down("late", 1, Some((late.id, 1)), false),
                down("local", 4, None, false),
            ],
            clones: true,
        };
        let p = plan_promotion(&s).unwrap();
        let by = |n: &str| p.Units.iter().find(|u| u.Unit == n).unwrap().Outcome.clone();
        assert_eq!(p.Units[0].Unit, "cache", "clones come first");
        assert_eq!(by("cache"), Outcome::Clone { At: 1, To: 4 });
        assert_eq!(by("web"), Outcome::Upgrade { From: 3, To: 5 });
        assert_eq!(by("db"), Outcome::Mark { Start: 2 });
        assert_eq!(by("late"), Outcome::Skip { Reason: SkipReason::CreatedAfterChangeOrder });
        assert_eq!(by("local"), Outcome::Mark { Start: 4 });
        assert_eq!(p.Digest, plan_promotion(&s).unwrap().Digest, "deterministic");
    }

    #[test]
    fn taken_units_are_passed_over_and_heads_pin_the_digest() {
        let web = up("web", Some((3, 5)));
        let mut s = Snapshot {
            upstream: vec![web.clone()],
            downstream: vec![down("web", 9, Some((web.id, 5)), true)],
            clones: true,
        };
        let p = plan_promotion(&s).unwrap();
        assert_eq!(p.Units[0].Outcome, Outcome::Skip { Reason: SkipReason::AlreadyTaken });
        s.downstream[0].head = 10;
        assert_ne!(plan_promotion(&s).unwrap().Digest, p.Digest);
    }

    #[test]
    fn a_unit_behind_the_start_is_an_error() {
        let web = up("web", Some((3, 5)));
        let s = Snapshot {
            upstream: vec![web.clone()],
            downstream: vec![down("web", 2, Some((web.id, 1)), false)],
            clones: true,
        };
        let e = plan_promotion(&s).unwrap_err();
        assert_eq!(e, PlanError::NotAtStart { unit: "web".into(), cursor: 1, start: 3 });
    }

    #[test]
    fn a_clone_may_not_shadow_a_local_unit() {
        let web = up("web", Some((0, 2)));
        let s = Snapshot { upstream: vec![web], downstream: vec![down("web", 1, None, false)], clones: true };
        assert!(matches!(plan_promotion(&s), Err(PlanError::SlugTaken { .. })));
    }
}
