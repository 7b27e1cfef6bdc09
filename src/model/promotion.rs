//! Promotions: a request to move a ChangeOrder into Spaces, recorded before any job is queued,
//! and the task per Space a worker carries out. Schedules: promotions requested by the clock.

use super::entities::entity;
use super::{Entity, Slug};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

/// Where a Promotion stands. Only `Running` promotions have work queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum PromotionState {
    #[default]
    Running,
    /// Every task reached an end and no wave is left.
    Completed,
    /// A wave's failure budget was spent; the tasks not yet started are left untouched.
    Halted,
    /// Cancelled by a user, or the ChangeOrder was aborted.
    Cancelled,
}

impl PromotionState {
    pub fn is_terminal(self) -> bool {
        self != PromotionState::Running
    }
}

/// Halt a wave after this many failed Spaces, or this share of the wave's Spaces.
#[allow(non_snake_case)]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureBudget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub MaxFailed: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub MaxFailedPercent: Option<f64>,
}

impl FailureBudget {
    /// Whether `failed` of a wave of `total` Spaces exceeds the budget, halting the wave at once.
    /// Without a budget a wave runs to its end; one that ends with failures starts nothing after.
    pub fn exceeded(&self, failed: usize, total: usize) -> bool {
        if failed == 0 {
            return false;
        }
        let by_count = self.MaxFailed.is_some_and(|m| failed > m as usize);
        let by_share =
            self.MaxFailedPercent.is_some_and(|p| (failed as f64) * 100.0 > p * total.max(1) as f64);
        by_count || by_share
    }
}

/// One Stage (or, without a workflow, the whole scope) a Promotion goes through.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromotionStage {
    /// The Stage's name; empty without a workflow.
    pub Name: String,
    /// Index into the frozen workflow's Stages; `None` without a workflow.
    pub Index: Option<usize>,
}

#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Promotion {
    pub PromotionID: Uuid,
    /// The ChangeOrder's base Space.
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub ChangeOrderID: Uuid,
    pub ChangeOrder: String,
    /// What asked for it: `cli`, `api`, `webhook:<slug>`, `schedule:<slug>`, `backfill`.
    pub Source: String,
    /// A caller's key: a second request with the same key while this one runs returns it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub IdempotencyKey: String,
    /// One named Space only (no waves beyond it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub TargetSpaceID: Option<Uuid>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub TargetStage: String,
    /// The Stages to go through, in order.
    pub Stages: Vec<PromotionStage>,
    /// Position in `Stages` of the wave being worked on.
    pub StagePos: usize,
    /// Ordinal of the current wave (a Stage may take several, one per hop depth).
    pub Wave: i64,
    pub RequestedBy: Uuid,
    pub Force: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub Reason: String,
    /// Tasks queued or running at once, across every worker (0: no cap).
    pub MaxInFlight: u32,
    /// Spaces started per second by each worker process for this Promotion (0: no cap).
    pub Rate: f64,
    pub FailureBudget: FailureBudget,
    /// Blocked tasks fail once this passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub Deadline: Option<DateTime<Utc>>,
    pub State: PromotionState,
    /// Why it halted or was cancelled.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub StateReason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub FinishedAt: Option<DateTime<Utc>>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(Promotion, "Promotion", PromotionID, space: |p: &Promotion| Some(p.SpaceID));

/// Where one Space's task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub enum TaskState {
    /// Written, waiting for its turn (wave or max-in-flight).
    Pending,
    /// A job for it is on the queue.
    Queued,
    /// A worker holds it (see the lease).
    Running,
    /// Entry gates closed: retried with backoff until they open.
    Blocked,
    Done,
    Failed,
    Cancelled,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "Pending",
            TaskState::Queued => "Queued",
            TaskState::Running => "Running",
            TaskState::Blocked => "Blocked",
            TaskState::Done => "Done",
            TaskState::Failed => "Failed",
            TaskState::Cancelled => "Cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, TaskState::Done | TaskState::Failed | TaskState::Cancelled)
    }

    /// Counts against max-in-flight.
    pub fn in_flight(self) -> bool {
        matches!(self, TaskState::Queued | TaskState::Running | TaskState::Blocked)
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TaskState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "Pending" => TaskState::Pending,
            "Queued" => TaskState::Queued,
            "Running" => TaskState::Running,
            "Blocked" => TaskState::Blocked,
            "Done" => TaskState::Done,
            "Failed" => TaskState::Failed,
            "Cancelled" => TaskState::Cancelled,
            other => return Err(format!("unknown task state '{other}'")),
        })
    }
}

/// The work for one Space of one Promotion. Stored in its own table (the wave driver counts
/// them by state), not as a generic entity.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromotionTask {
    pub TaskID: Uuid,
    pub PromotionID: Uuid,
    pub SpaceID: Uuid,
    pub Space: String,
    /// The Stage's name (empty without a workflow) and its wave ordinal.
    pub Stage: String,
    pub Wave: i64,
    pub State: TaskState,
    /// Deliveries that got as far as evaluating gates.
    pub Attempts: u32,
    /// Bumped each time the task is (re-)queued; a job of an older generation is stale.
    pub Generation: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub Worker: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub LeaseUntil: Option<DateTime<Utc>>,
    /// When a Queued or Blocked task should next be picked up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub DueAt: Option<DateTime<Utc>>,
    /// Why it waits, failed or was cancelled.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub Reason: String,
    /// Every failing entry gate, when Blocked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub FailingGates: Vec<String>,
    /// Units that received the change here, and Units passed over.
    pub UnitsChanged: u32,
    pub UnitsSkipped: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub StartedAt: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub FinishedAt: Option<DateTime<Utc>>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}

/// What a Schedule does when it fires.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "Kind")]
pub enum ScheduleAction {
    /// Promote the ChangeOrder to `TargetStage` (or its next Stage); for an Invoke ChangeOrder,
    /// run it over its scope.
    Promote { ChangeOrderID: Uuid, TargetStage: Option<String> },
}

#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub ScheduleID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    /// Five fields (minute hour day-of-month month day-of-week) or six with seconds first.
    pub Cron: String,
    /// IANA time zone the expression is read in, e.g. `Europe/Berlin`.
    pub TimeZone: String,
    pub Action: ScheduleAction,
    /// Whose permissions the Promotions run with.
    pub OwnerID: Uuid,
    /// The last tick that created a Promotion (or was found to have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub LastFiredAt: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub NextFireAt: Option<DateTime<Utc>>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(Schedule, "Schedule", ScheduleID, space: |s: &Schedule| Some(s.SpaceID));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_budget_by_count_and_share() {
        let none = FailureBudget::default();
        assert!(!none.exceeded(0, 10));
        assert!(!none.exceeded(3, 10), "no budget: failures are tolerated within the wave");
        let two = FailureBudget { MaxFailed: Some(2), MaxFailedPercent: None };
        assert!(!two.exceeded(2, 10));
        assert!(two.exceeded(3, 10));
        let pct = FailureBudget { MaxFailed: None, MaxFailedPercent: Some(25.0) };
        assert!(!pct.exceeded(2, 8));
        assert!(pct.exceeded(3, 8));
    }

    #[test]
    fn task_states_round_trip() {
        for s in [
            TaskState::Pending,
            TaskState::Queued,
            TaskState::Running,
            TaskState::Blocked,
            TaskState::Done,
            TaskState::Failed,
            TaskState::Cancelled,
        ] {
            assert_eq!(s.as_str().parse::<TaskState>().unwrap(), s);
        }
        assert!("Nope".parse::<TaskState>().is_err());
    }
}
