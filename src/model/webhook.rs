//! Webhooks: an endpoint that turns an authenticated HTTP delivery (a CI build, a GitOps
//! operator) into an action on a ChangeOrder. The secret is kept apart from the entity and
//! shown once, at creation.

use super::entities::entity;
use super::{Entity, Slug};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What a delivery does.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "Kind")]
pub enum WebhookAction {
    /// Promote the ChangeOrder to its next Stage, or to `TargetStage`.
    Promote { ChangeOrderID: Uuid, TargetStage: Option<String> },
    /// Record an Attestation of `Type` (e.g. `ci-passed`) by the webhook's owner in `SpaceID`.
    Attest { ChangeOrderID: Uuid, SpaceID: Uuid, Type: String },
    /// Create an Invoke ChangeOrder of `InvocationID` whose parameters come from the payload
    /// (`Parameters`: name → JSON pointer into the body) over `WhereSpace`, and roll it out.
    Invoke {
        InvocationID: Uuid,
        Parameters: std::collections::BTreeMap<String, String>,
        WhereSpace: String,
        #[serde(default)]
        WhereUnit: String,
    },
    /// Set live status from an Argo CD notification (an Application: `metadata.name`,
    /// `status.sync.status`, `status.health.status`, `status.operationState.phase`, possibly
    /// under `app`). The Space is `SpaceID`, or the Application's name when absent.
    LiveStatus { SpaceID: Option<Uuid> },
}

#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Webhook {
    pub WebhookID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    pub Action: WebhookAction,
    /// Whose permissions the action runs with: the user who created the webhook.
    pub OwnerID: Uuid,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(Webhook, "Webhook", WebhookID, space: |w: &Webhook| Some(w.SpaceID));
