//! Attestations: approvals (or rejections) of a change as it stands in a Space. Creating one
//! needs Approve on the Space; revoking writes a new record.

use super::{Actor, OpError, Result, resolve};
use crate::model::{
    Attestation, AttestationResult, AttestedRevision, ChangeOrder, Permission, Slug, Space, Unit,
};
use crate::store::{MarkKind, Store, Tx};
use chrono::Utc;
use serde::Deserialize;
use std::collections::BTreeMap;
use uuid::Uuid;

/// The body of an attestation.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateAttestation {
    /// `space/slug` or UUID of the ChangeOrder attested.
    pub ChangeOrder: String,
    /// `Approval` by default.
    #[serde(default)]
    pub Type: Option<String>,
    /// Record a Fail instead of a Pass.
    #[serde(default)]
    pub Reject: bool,
    /// How long it counts, e.g. `72h`.
    #[serde(default)]
    pub ExpiresIn: Option<String>,
    #[serde(default)]
    pub Note: String,
}

/// The revisions the ChangeOrder's end Tag marks in `space` (the highest per Unit).
pub(crate) async fn end_revisions(
    tx: &mut Tx,
    co: &ChangeOrder,
    space: &Space,
) -> Result<Vec<AttestedRevision>> {
    let mut heads: BTreeMap<Uuid, i64> = BTreeMap::new();
    for m in tx.marked_in_space(MarkKind::Tag, co.EndTagID, space.SpaceID).await? {
        let e = heads.entry(m.unit).or_insert(m.revision_num);
        *e = (*e).max(m.revision_num);
    }
    let mut out = vec![];
    for (unit, num) in heads {
        let (rev, _) = tx.must_revision(unit, num).await?;
        let slug = tx.get::<Unit>(unit).await?.map(|u| u.Slug.to_string()).unwrap_or_default();
        out.push(AttestedRevision { UnitID: unit, UnitSlug: slug, RevisionNum: num, DataHash: rev.DataHash });
    }
    Ok(out)
}

/// Records a Pass (or, with `Reject`, a Fail) by the caller over the revisions the ChangeOrder's
/// end Tag marks in `space`.
pub async fn create_attestation(
    store: &Store,
    actor: &Actor,
    space: &str,
    req: CreateAttestation,
) -> Result<Attestation> {
    let expires = match &req.ExpiresIn {
        Some(d) => {
            Some(crate::gates::parse_duration(d).map_err(|e| OpError::invalid("ExpiresIn", d.as_str(), e))?)
        }
        None => None,
    };
    let kind = req.Type.clone().unwrap_or_else(|| "Approval".into());
    Slug::parse_field("Type", &kind)?;
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Approve)?;
    let (_, co) = resolve::qualified::<ChangeOrder>(&mut tx, &req.ChangeOrder, None).await?;
    let revisions = end_revisions(&mut tx, &co, &sp).await?;
    if revisions.is_empty() {
        return Err(OpError::unprocessable(
            "Space",
            sp.Slug.as_str(),
            format!(
                "space '{}' has not taken change order '{}': there is nothing to attest yet",
                sp.Slug, co.Slug
            ),
        ));
    }
    let now = Utc::now();
    let id = Uuid::new_v4();
    let att = Attestation {
        AttestationID: id,
        SpaceID: sp.SpaceID,
        Slug: Slug::parse(&format!("att-{}", id.simple()))?,
        Type: kind,
        Result: if req.Reject { AttestationResult::Fail } else { AttestationResult::Pass },
        UserID: actor.id(),
        ChangeOrderID: Some(co.ChangeOrderID),
        Revisions: revisions,
        Note: req.Note,
        ExpiresAt: expires.map(|d| now + d),
        RevokedAttestationID: None,
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    tx.insert(&att).await?;
    tx.commit().await?;
    super::stages::refresh_stage(store, co.ChangeOrderID).await?;
    Ok(att)
}

/// Revokes an Attestation by writing a new record pointing at it. Its author or a Space
/// manager may.
pub async fn revoke_attestation(store: &Store, actor: &Actor, space: &str, key: &str) -> Result<Attestation> {
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    let original = resolve::in_space::<Attestation>(&mut tx, &sp, key).await?;
    if original.UserID != actor.id() {
        actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Manage)?;
    }
    if original.RevokedAttestationID.is_some() {
        return Err(OpError::invalid(
            "Attestation",
            key,
            "this is a revocation record; it cannot be revoked",
        ));
    }
    let all = tx.list::<Attestation>(Some(sp.SpaceID)).await?;
    if all.iter().any(|a| a.RevokedAttestationID == Some(original.AttestationID)) {
        return Err(OpError::Conflict {
            field: "Attestation".into(),
            value: key.into(),
            message: format!("attestation '{key}' is already revoked"),
        });
    }
    let now = Utc::now();
    let id = Uuid::new_v4();
    let record = Attestation {
        AttestationID: id,
        Slug: Slug::parse(&format!("att-{}", id.simple()))?,
        UserID: actor.id(),
        RevokedAttestationID: Some(original.AttestationID),
        Note: format!("revokes {}", original.Slug),
        ExpiresAt: None,
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
        ..original
    };
    tx.insert(&record).await?;
    tx.commit().await?;
    Ok(record)
}

/// The Attestations of a Space, optionally of one ChangeOrder, oldest first.
pub async fn list_attestations(
    store: &Store,
    actor: &Actor,
    space: &str,
    change_order: Option<&str>,
) -> Result<Vec<Attestation>> {
    let mut tx = store.read().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::View)?;
    let co = match change_order {
        Some(c) => Some(resolve::qualified::<ChangeOrder>(&mut tx, c, None).await?.1.ChangeOrderID),
        None => None,
    };
    let mut all: Vec<Attestation> = tx
        .list::<Attestation>(Some(sp.SpaceID))
        .await?
        .into_iter()
        .filter(|a| co.is_none() || a.ChangeOrderID == co)
        .collect();
    all.sort_by_key(|a| a.CreatedAt);
    Ok(all)
}
