//! ChangeOrders, the pure part: deriving what a new ChangeOrder covers, checking its scope hop
//! by hop, planning a promotion into one Space from a snapshot, and reducing derived sets to a
//! State. No I/O: `ops::changeorders` reads the snapshots and applies the plans.

mod derive;
mod plan;
mod scope;
mod state;

pub use derive::{BaseUnit, Coverage, DeriveError, derive_coverage};
pub use plan::{
    DownstreamUnit, Outcome, Plan, PlanError, SkipReason, Snapshot, UnitPlan, UpstreamUnit, digest,
    plan_promotion,
};
pub use scope::{ScopeError, check_hops, hop_order, reach};
pub use state::{DerivedSets, reduce_state};
