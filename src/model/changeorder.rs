//! ChangeOrders: the identity one change keeps as it crosses Space boundaries.

use super::entities::entity;
use super::{Entity, Labels, Slug};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use uuid::Uuid;

/// How a ChangeOrder propagates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ChangeOrderType {
    /// Follows the clone lineage (UpgradeUnit links).
    #[default]
    UpgradeUnit,
    /// Follows MergeUnits links.
    MergeUnits,
    /// Runs one Invocation in every Space in scope.
    Invoke,
}

impl fmt::Display for ChangeOrderType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One Unit of the base Space the ChangeOrder carries: its interval (start, end].
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoveredUnit {
    pub UnitID: Uuid,
    pub Slug: String,
    /// The revision every downstream has already taken (the start Tag marks it).
    pub StartRevisionNum: i64,
    /// The last revision of the change (the end Tag marks it).
    pub EndRevisionNum: i64,
}

/// A Unit of the base Space the ChangeOrder carries no revisions of, and why.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedUnit {
    pub UnitID: Uuid,
    pub Slug: String,
    pub Reason: String,
}

/// The record of a promotion forced past failing entry gates.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromotionOverride {
    pub Stage: String,
    pub FailedGates: Vec<String>,
    pub Reason: String,
    pub UserID: Uuid,
    pub OverriddenAt: DateTime<Utc>,
}

/// A named change in a base Space, followed through promotion into other Spaces.
/// `State` and the `…SpaceIDs` sets are derived on read (see `changeorder::state`), never stored.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeOrder {
    pub ChangeOrderID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    #[serde(default)]
    pub Description: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    pub UpdateType: ChangeOrderType,
    pub StartTagID: Uuid,
    pub EndTagID: Uuid,
    /// The boundary Tag adopted with `--end-tag`; never written to.
    #[serde(default)]
    pub AdoptedEndTagID: Option<Uuid>,
    /// Minted by the first undo.
    #[serde(default)]
    pub RestoreTagID: Option<Uuid>,
    /// Where the change is headed: an answer, recorded.
    #[serde(default)]
    pub InScopeSpaceIDs: Vec<Uuid>,
    #[serde(default)]
    pub WhereSpace: String,
    #[serde(default)]
    pub SpaceFilterID: Option<Uuid>,
    /// Invoke only: which Units of each Space are covered (asked again on every read).
    #[serde(default)]
    pub WhereUnit: String,
    #[serde(default)]
    pub UnitFilterID: Option<Uuid>,
    #[serde(default)]
    pub InvocationID: Option<Uuid>,
    #[serde(default)]
    pub Parameters: BTreeMap<String, String>,
    /// The base Units the change carries, with their intervals.
    #[serde(default)]
    pub CoveredUnits: Vec<CoveredUnit>,
    #[serde(default)]
    pub SkippedUnits: Vec<SkippedUnit>,
    #[serde(default)]
    pub AbortedReason: String,
    #[serde(default)]
    pub ChangeWorkflowID: Option<Uuid>,
    /// The workflow definition frozen onto this ChangeOrder at creation.
    #[serde(default)]
    pub ChangeWorkflow: Option<serde_json::Value>,
    /// The Stage reached, or `Completed`.
    #[serde(default)]
    pub Stage: String,
    #[serde(default)]
    pub PromotionOverrides: Vec<PromotionOverride>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}

entity!(ChangeOrder, "ChangeOrder", ChangeOrderID, space: |c: &ChangeOrder| Some(c.SpaceID));

/// A ChangeOrder's position, derived from the sets below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChangeOrderState {
    New,
    InProgress,
    Resolved,
    Released,
    Aborted,
    Restored,
    RestoreReleased,
}

/// A ChangeOrder as the API returns it: the record plus what is derived on read.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeOrderView {
    #[serde(flatten)]
    pub Order: ChangeOrder,
    pub ResolvedSpaceIDs: Vec<Uuid>,
    pub ReleasedSpaceIDs: Vec<Uuid>,
    pub RestoredSpaceIDs: Vec<Uuid>,
    pub ReleasedRestoredSpaceIDs: Vec<Uuid>,
    pub State: ChangeOrderState,
}

/// A ChangeWorkflow: the Stages (waves) a change moves through and their gates. A child of a
/// Space; its definition is checked and compiled (`gates::compile`) when written.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeWorkflow {
    pub ChangeWorkflowID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    #[serde(default)]
    pub Description: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    pub Stages: Vec<crate::gates::StageSpec>,
    #[serde(default)]
    pub Final: crate::gates::FinalSpec,
    #[serde(default)]
    pub CustomPrerequisites: Vec<crate::gates::CustomPrerequisite>,
    #[serde(default)]
    pub AttestationPrerequisites: Vec<crate::gates::AttestationPrerequisite>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}

impl ChangeWorkflow {
    /// The definition alone, as it is frozen onto a ChangeOrder.
    pub fn spec(&self) -> crate::gates::ChangeWorkflowSpec {
        crate::gates::ChangeWorkflowSpec {
            Stages: self.Stages.clone(),
            Final: self.Final.clone(),
            CustomPrerequisites: self.CustomPrerequisites.clone(),
            AttestationPrerequisites: self.AttestationPrerequisites.clone(),
        }
    }
}

entity!(ChangeWorkflow, "ChangeWorkflow", ChangeWorkflowID, space: |w: &ChangeWorkflow| Some(w.SpaceID));
