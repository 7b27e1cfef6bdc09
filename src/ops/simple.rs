//! The small space-resident entities: Tags, Filters, Targets, Links. Reading, listing and
//! deleting is the same for all of them; creating checks what is particular to each.

use super::spaces::{parse_where, to_json};
use super::{Actor, OpError, Result, resolve};
use crate::model::{
    Entity, Filter, Labels, Link, Permission, Slug, Tag, Target, Unit, UpdateType, validate_labels,
};
use crate::store::Store;
use chrono::Utc;
use serde::Deserialize;
use uuid::Uuid;

/// Lists entities of kind `E` in one Space, or across every visible Space with `None`/`*`.
pub async fn list_in_space<E: Entity>(
    store: &Store,
    actor: &Actor,
    space: Option<&str>,
    where_: Option<&str>,
) -> Result<Vec<E>> {
    let filter = parse_where(E::KIND, where_)?;
    let mut tx = store.read().await?;
    let scope = resolve::list_scope(&mut tx, actor, space).await?;
    Ok(tx
        .list::<E>(scope)
        .await?
        .into_iter()
        .filter(|e| e.space_id().is_some_and(|s| actor.can_view(s)))
        .filter(|e| filter.as_ref().is_none_or(|f| f.matches(&to_json(e))))
        .collect())
}

/// Reads one entity of kind `E` in a Space.
pub async fn get_in_space<E: Entity>(store: &Store, actor: &Actor, space: &str, key: &str) -> Result<E> {
    let mut tx = store.read().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::View)?;
    resolve::in_space::<E>(&mut tx, &sp, key).await
}

/// Deletes one entity of kind `E` in a Space. Needs Edit.
pub async fn delete_in_space<E: Entity>(store: &Store, actor: &Actor, space: &str, key: &str) -> Result<()> {
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Edit)?;
    let e = resolve::in_space::<E>(&mut tx, &sp, key).await?;
    tx.delete::<E>(e.id()).await?;
    tx.commit().await?;
    Ok(())
}

/// Inserts a new entity into a Space after `build` made it from the Space's ID. Needs Edit.
async fn create_in_space<E: Entity>(
    store: &Store,
    actor: &Actor,
    space: &str,
    build: impl FnOnce(Uuid) -> Result<E>,
) -> Result<E> {
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Edit)?;
    let e = build(sp.SpaceID)?;
    tx.insert(&e).await?;
    tx.commit().await?;
    Ok(e)
}

/// The body of a Tag creation.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTag {
    pub Slug: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
}

pub async fn create_tag(store: &Store, actor: &Actor, space: &str, req: CreateTag) -> Result<Tag> {
    let slug = Slug::parse(&req.Slug)?;
    validate_labels("Labels", &req.Labels)?;
    validate_labels("Annotations", &req.Annotations)?;
    create_in_space(store, actor, space, |space_id| {
        let now = Utc::now();
        Ok(Tag {
            TagID: Uuid::new_v4(),
            SpaceID: space_id,
            DisplayName: slug.to_string(),
            Slug: slug,
            Labels: req.Labels,
            Annotations: req.Annotations,
            ChangeOrderID: None,
            Version: 1,
            CreatedAt: now,
            UpdatedAt: now,
        })
    })
    .await
}

/// The body of a Filter creation.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateFilter {
    pub Slug: String,
    pub From: String,
    pub Where: String,
    #[serde(default)]
    pub Labels: Labels,
}

/// Creates a Filter; its where expression is parsed for the `From` entity now, not when used.
pub async fn create_filter(store: &Store, actor: &Actor, space: &str, req: CreateFilter) -> Result<Filter> {
    let slug = Slug::parse(&req.Slug)?;
    if crate::query::attrs::entity(&req.From).is_none() {
        return Err(OpError::invalid(
            "From",
            &req.From,
            "expected an entity kind such as Space, Unit, Revision, Link",
        ));
    }
    parse_where(&req.From, Some(&req.Where))?;
    validate_labels("Labels", &req.Labels)?;
    create_in_space(store, actor, space, |space_id| {
        let now = Utc::now();
        Ok(Filter {
            FilterID: Uuid::new_v4(),
            SpaceID: space_id,
            DisplayName: slug.to_string(),
            Slug: slug,
            Labels: req.Labels,
            Annotations: Labels::new(),
            From: req.From,
            Where: req.Where,
            Version: 1,
            CreatedAt: now,
            UpdatedAt: now,
        })
    })
    .await
}

/// The body of a Target creation.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTarget {
    pub Slug: String,
    pub ProviderType: String,
    #[serde(default)]
    pub Options: Labels,
    #[serde(default)]
    pub Labels: Labels,
}

/// Creates a Target: `Directory` needs option `path`, `Webhook` needs option `url` (http/https).
pub async fn create_target(store: &Store, actor: &Actor, space: &str, req: CreateTarget) -> Result<Target> {
    let slug = Slug::parse(&req.Slug)?;
    let required = match req.ProviderType.as_str() {
        "Directory" => "path",
        "Webhook" => "url",
        other => {
            return Err(OpError::invalid("ProviderType", other, "expected Directory or Webhook"));
        }
    };
    let value = req.Options.get(required).filter(|v| !v.is_empty()).ok_or_else(|| {
        OpError::invalid(
            format!("Options.{required}"),
            "",
            format!("a {} target needs option '{required}'", req.ProviderType),
        )
    })?;
    if required == "url" && !(value.starts_with("http://") || value.starts_with("https://")) {
        return Err(OpError::invalid("Options.url", value, "must start with http:// or https://"));
    }
    validate_labels("Labels", &req.Labels)?;
    create_in_space(store, actor, space, |space_id| {
        let now = Utc::now();
        Ok(Target {
            TargetID: Uuid::new_v4(),
            SpaceID: space_id,
            DisplayName: slug.to_string(),
            Slug: slug,
            Labels: req.Labels,
            Annotations: Labels::new(),
            ProviderType: req.ProviderType,
            Options: req.Options,
            LastReleaseNum: 0,
            Version: 1,
            CreatedAt: now,
            UpdatedAt: now,
        })
    })
    .await
}

/// The body of a Link creation.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateLink {
    pub Slug: String,
    /// The downstream Unit, in the link's Space.
    pub FromUnit: String,
    /// The upstream Unit, as `space/unit` or UUID.
    pub ToUnit: String,
    #[serde(default)]
    pub UpdateType: Option<String>,
}

/// Creates a Link. A MergeUnits link starts with its cursor at 0: the first merge carries the
/// upstream's whole history. An UpgradeUnit link is made by `variant create`, with lineage.
pub async fn create_link(store: &Store, actor: &Actor, space: &str, req: CreateLink) -> Result<Link> {
    let slug = Slug::parse(&req.Slug)?;
    let update_type: UpdateType = req.UpdateType.as_deref().unwrap_or("MergeUnits").parse()?;
    if update_type == UpdateType::UpgradeUnit {
        return Err(OpError::invalid(
            "UpdateType",
            "UpgradeUnit",
            "UpgradeUnit links carry clone lineage and are created by `variant create`; use MergeUnits",
        ));
    }
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Edit)?;
    let from = resolve::in_space::<Unit>(&mut tx, &sp, &req.FromUnit).await?;
    let (to_space, to) = resolve::qualified::<Unit>(&mut tx, &req.ToUnit, Some(&sp)).await?;
    actor.require(to_space.SpaceID, to_space.Slug.as_str(), Permission::View)?;
    if to.UnitID == from.UnitID {
        return Err(OpError::invalid("ToUnit", &req.ToUnit, "a unit cannot link to itself"));
    }
    let now = Utc::now();
    let link = Link {
        LinkID: Uuid::new_v4(),
        SpaceID: sp.SpaceID,
        DisplayName: slug.to_string(),
        Slug: slug,
        Labels: Labels::new(),
        Annotations: Labels::new(),
        FromUnitID: from.UnitID,
        ToUnitID: to.UnitID,
        ToSpaceID: to_space.SpaceID,
        UpdateType: update_type,
        UpstreamLastMergedRevisionNum: 0,
        DownstreamLastMergedRevisionNum: 0,
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    tx.insert(&link).await?;
    tx.commit().await?;
    Ok(link)
}
