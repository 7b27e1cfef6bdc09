//! Variants: a Space cloned from another with every Unit and an UpgradeUnit link per Unit, and
//! `variant promote` without a ChangeOrder (upgrade what is behind, clone what is missing).

use super::units::append_revision;
use super::upgrade::{merge_through, upgrade_link};
use super::{Actor, OpError, Result, resolve};
use crate::model::{
    Labels, Link, Permission, RevisionSource, Slug, Space, Unit, UpdateType, validate_labels,
};
use crate::store::{Store, Tx};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The body of a variant creation.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateVariant {
    pub Slug: String,
    /// Labels overriding the upstream's (an empty value removes one).
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
}

/// The new variant and what was cloned into it.
#[allow(non_snake_case)]
#[derive(Debug, Serialize)]
pub struct VariantCreated {
    pub Space: Space,
    pub Units: Vec<Unit>,
    pub Links: Vec<Link>,
}

/// Clones `from` into a new Space with every Unit, each linked upstream. One transaction.
pub async fn create_variant(
    store: &Store,
    actor: &Actor,
    from: &str,
    req: CreateVariant,
) -> Result<VariantCreated> {
    let slug = Slug::parse(&req.Slug)?;
    if !actor.user.Admin
        && !actor.user.Grants.iter().any(|g| g.SpaceID.is_none() && g.Permission >= Permission::Edit)
    {
        return Err(OpError::Forbidden {
            user: actor.user.Slug.to_string(),
            permission: Permission::Edit,
            space: "*".into(),
        });
    }
    let mut tx = store.write().await?;
    let upstream = resolve::space(&mut tx, from).await?;
    actor.require(upstream.SpaceID, upstream.Slug.as_str(), Permission::View)?;
    let mut labels = upstream.Labels.clone();
    let mut annotations = upstream.Annotations.clone();
    for (into, changes) in [(&mut labels, req.Labels), (&mut annotations, req.Annotations)] {
        for (k, v) in changes {
            if v.is_empty() {
                into.remove(&k)
            } else {
                into.insert(k, v)
            };
        }
    }
    validate_labels("Labels", &labels)?;
    validate_labels("Annotations", &annotations)?;
    let mut space = Space::new(slug, labels, annotations)?;
    space.UpstreamSpaceID = Some(upstream.SpaceID);
    tx.insert(&space).await?;
    let mut units = vec![];
    let mut links = vec![];
    for up in tx.list::<Unit>(Some(upstream.SpaceID)).await? {
        let (u, l) = clone_unit(&mut tx, actor, &space, &up, up.HeadRevisionNum).await?;
        units.push(u);
        links.push(l);
    }
    tx.commit().await?;
    Ok(VariantCreated { Space: space, Units: units, Links: links })
}

/// Clones `up` at revision `at` into `space` with an UpgradeUnit link whose cursors sit at the
/// clone.
pub(crate) async fn clone_unit(
    tx: &mut Tx,
    actor: &Actor,
    space: &Space,
    up: &Unit,
    at: i64,
) -> Result<(Unit, Link)> {
    let (_, data) = tx.must_revision(up.UnitID, at).await?;
    let now = Utc::now();
    let mut unit = Unit {
        UnitID: Uuid::new_v4(),
        SpaceID: space.SpaceID,
        Slug: up.Slug.clone(),
        DisplayName: up.DisplayName.clone(),
        Labels: up.Labels.clone(),
        Annotations: up.Annotations.clone(),
        ToolchainType: up.ToolchainType,
        HeadRevisionNum: 0,
        HeadRevisionID: Uuid::nil(),
        DataHash: String::new(),
        DataSize: 0,
        LastChangeDescription: String::new(),
        UpstreamUnitID: Some(up.UnitID),
        UpstreamSpaceID: Some(up.SpaceID),
        UpstreamRevisionNum: at,
        LastReleasedRevisionNum: 0,
        TargetID: None,
        ProtectedPaths: vec![],
        Conflicts: vec![],
        ValidationErrors: up.ValidationErrors.clone(),
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    let desc = format!("cloned from {}#{}", up.Slug, up.HeadRevisionNum);
    append_revision(tx, &mut unit, &data, RevisionSource::CloneUnit, actor.id(), &desc, up.HeadRevisionNum)
        .await?;
    tx.insert(&unit).await?;
    let link = Link {
        LinkID: Uuid::new_v4(),
        SpaceID: space.SpaceID,
        Slug: unit.Slug.clone(),
        DisplayName: format!("upgrade {} from upstream", unit.Slug),
        Labels: Labels::new(),
        Annotations: Labels::new(),
        FromUnitID: unit.UnitID,
        ToUnitID: up.UnitID,
        ToSpaceID: up.SpaceID,
        UpdateType: UpdateType::UpgradeUnit,
        UpstreamLastMergedRevisionNum: at,
        DownstreamLastMergedRevisionNum: unit.HeadRevisionNum,
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    tx.insert(&link).await?;
    Ok((unit, link))
}

/// What `variant promote` did to one Unit.
#[allow(non_snake_case)]
#[derive(Debug, Serialize)]
pub struct PromotedUnit {
    pub Slug: String,
    /// `Upgrade`, `Clone` or `UpToDate`.
    pub Outcome: String,
    pub RevisionsWritten: usize,
    pub Conflicts: usize,
    pub HeadRevisionNum: i64,
}

/// Brings a variant up to its upstream without a ChangeOrder: every Unit behind its upstream is
/// upgraded and every upstream Unit the variant lacks is cloned. One transaction.
pub async fn promote_variant(
    store: &Store,
    actor: &Actor,
    space: &str,
    squash: bool,
) -> Result<Vec<PromotedUnit>> {
    let mut tx = store.write().await?;
    let space = resolve::space(&mut tx, space).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::Edit)?;
    let upstream_id = space.UpstreamSpaceID.ok_or_else(|| {
        OpError::unprocessable(
            "Space",
            space.Slug.as_str(),
            format!("space '{}' is not a variant (no upstream space)", space.Slug),
        )
    })?;
    let mut out = vec![];
    let units = tx.list::<Unit>(Some(space.SpaceID)).await?;
    for u in &units {
        let Some(link) = upgrade_link(&mut tx, &space, u).await? else {
            continue;
        };
        let r = merge_through(&mut tx, actor, u.clone(), link, squash, None).await?;
        let outcome = if r.Revisions.is_empty() && r.Unit.UpstreamRevisionNum == u.UpstreamRevisionNum {
            "UpToDate"
        } else {
            "Upgrade"
        };
        out.push(PromotedUnit {
            Slug: u.Slug.to_string(),
            Outcome: outcome.into(),
            RevisionsWritten: r.Revisions.len(),
            Conflicts: r.Conflicts.len(),
            HeadRevisionNum: r.Unit.HeadRevisionNum,
        });
    }
    for up in tx.list::<Unit>(Some(upstream_id)).await? {
        if units.iter().any(|u| u.UpstreamUnitID == Some(up.UnitID)) {
            continue;
        }
        if units.iter().any(|u| u.Slug == up.Slug) {
            return Err(OpError::unprocessable(
                "Unit",
                up.Slug.as_str(),
                format!(
                    "cannot clone upstream unit '{}': the variant has its own unit with that slug",
                    up.Slug
                ),
            ));
        }
        let (u, _) = clone_unit(&mut tx, actor, &space, &up, up.HeadRevisionNum).await?;
        out.push(PromotedUnit {
            Slug: u.Slug.to_string(),
            Outcome: "Clone".into(),
            RevisionsWritten: 1,
            Conflicts: 0,
            HeadRevisionNum: u.HeadRevisionNum,
        });
    }
    tx.commit().await?;
    Ok(out)
}
