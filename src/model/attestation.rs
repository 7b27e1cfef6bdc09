//! Attestations: a user's recorded Pass or Fail (an approval by default) of a change as it
//! stands in one Space. Revoking is a new record pointing at the one it revokes.

use super::entities::entity;
use super::{Entity, Slug};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Pass or Fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttestationResult {
    Pass,
    Fail,
}

/// One revision an Attestation covers, with its content hash (an attestation also counts for a
/// later revision of the same Unit with the same content).
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttestedRevision {
    pub UnitID: Uuid,
    pub UnitSlug: String,
    pub RevisionNum: i64,
    pub DataHash: String,
}

#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attestation {
    pub AttestationID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    /// `Approval` by default.
    pub Type: String,
    pub Result: AttestationResult,
    pub UserID: Uuid,
    #[serde(default)]
    pub ChangeOrderID: Option<Uuid>,
    pub Revisions: Vec<AttestedRevision>,
    #[serde(default)]
    pub Note: String,
    #[serde(default)]
    pub ExpiresAt: Option<DateTime<Utc>>,
    /// Set on a revocation record: the Attestation it revokes.
    #[serde(default)]
    pub RevokedAttestationID: Option<Uuid>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}

entity!(Attestation, "Attestation", AttestationID, space: |a: &Attestation| Some(a.SpaceID));
