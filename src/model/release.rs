//! Releases: the immutable record of one bundle of a Space's Units delivered to its release
//! Target, plus the live status a GitOps operator reports back about it.
//!
//! A Release names exactly which revision of each Unit it carried (and marks them with its own
//! Tag), so "what is deployed" is a fact that can be read later, compared by `Digest`, and gated
//! on (`Released`, `Healthy`). Only `LiveStatus`, `Labels` and `Annotations` change afterwards.

use super::entities::entity;
use super::{Entity, InvalidField, Labels, Slug};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

/// One Unit's revision carried by a Release.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleasedRevision {
    pub UnitID: Uuid,
    pub UnitSlug: String,
    pub RevisionNum: i64,
    pub DataHash: String,
}

/// Declares a closed set of status words that serialize as themselves and parse with an error
/// naming the field, the value and the accepted words.
macro_rules! status_enum {
    ($(#[$doc:meta])* $name:ident, $field:literal, [$($variant:ident),+]) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            /// Every accepted word, in declaration order.
            pub const ALL: &'static [&'static str] = &[$(stringify!($variant)),+];
        }

        impl FromStr for $name {
            type Err = InvalidField;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $(stringify!($variant) => Ok(Self::$variant),)+
                    _ => Err(InvalidField::new(
                        $field,
                        s,
                        format!("expected one of {}", Self::ALL.join(", ")),
                    )),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }
    };
}

status_enum!(
    /// Whether the live state matches the released configuration.
    SyncStatus, "Sync", [Synced, OutOfSync, Unknown]
);
status_enum!(
    /// The phase of the operator's last sync operation.
    OperationPhase, "Operation", [Succeeded, Running, Failed, Error, Unknown]
);
status_enum!(
    /// The health of the deployed resources, as the operator assesses it.
    HealthStatus, "Health", [Healthy, Progressing, Degraded, Suspended, Missing, Unknown]
);

/// What a GitOps operator last reported about a Release.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveStatus {
    pub Sync: SyncStatus,
    pub Operation: OperationPhase,
    pub Health: HealthStatus,
    #[serde(default)]
    pub Message: String,
    pub ObservedAt: DateTime<Utc>,
}

impl LiveStatus {
    /// Synced, Succeeded and Healthy: what the `Healthy` gate asks for.
    pub fn is_healthy(&self) -> bool {
        self.Sync == SyncStatus::Synced
            && self.Operation == OperationPhase::Succeeded
            && self.Health == HealthStatus::Healthy
    }
}

/// A published bundle of a Space's Units, delivered to the Space's release Target.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Release {
    pub ReleaseID: Uuid,
    /// The publishing Space.
    pub SpaceID: Uuid,
    /// `release-<ReleaseNum>`.
    pub Slug: Slug,
    pub DisplayName: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    pub TargetID: Uuid,
    /// 1, 2, … per Target; the highest is the latest.
    pub ReleaseNum: i64,
    /// The Release's own Tag, marking every bundled revision.
    pub TagID: Uuid,
    /// The bundled revisions, by Unit Slug.
    pub Revisions: Vec<ReleasedRevision>,
    /// The `--revision` it was published with; empty for heads.
    #[serde(default)]
    pub RevisionSpec: String,
    /// Set when published with `ChangeOrder:<ref>`.
    #[serde(default)]
    pub ChangeOrderID: Option<Uuid>,
    /// SHA-256 over the bundled content (Unit Slugs and data): equal content, equal Digest.
    pub Digest: String,
    pub PublishedBy: Uuid,
    #[serde(default)]
    pub LiveStatus: Option<LiveStatus>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}

entity!(Release, "Release", ReleaseID, space: |r: &Release| Some(r.SpaceID));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_words_parse_and_name_the_field() {
        assert_eq!("OutOfSync".parse::<SyncStatus>().unwrap(), SyncStatus::OutOfSync);
        assert_eq!("Error".parse::<OperationPhase>().unwrap(), OperationPhase::Error);
        let e = "Fine".parse::<HealthStatus>().unwrap_err();
        assert_eq!((e.field.as_str(), e.value.as_str()), ("Health", "Fine"));
        assert!(e.reason.contains("Healthy, Progressing, Degraded, Suspended, Missing, Unknown"));
        assert!("synced".parse::<SyncStatus>().is_err(), "the words are case-sensitive");
        assert_eq!(serde_json::to_value(HealthStatus::Degraded).unwrap(), "Degraded");
    }

    #[test]
    fn healthy_needs_all_three() {
        let mut s = LiveStatus {
            Sync: SyncStatus::Synced,
            Operation: OperationPhase::Succeeded,
            Health: HealthStatus::Healthy,
            Message: String::new(),
            ObservedAt: Utc::now(),
        };
        assert!(s.is_healthy());
        s.Operation = OperationPhase::Running;
        assert!(!s.is_healthy());
    }
}
