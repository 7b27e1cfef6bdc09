//! Spaces: create, read, list with a where expression, update, delete.

use super::{Actor, OpError, Result, resolve};
use crate::model::{Entity, Labels, Permission, Slug, Space, Target, Unit, validate_labels};
use crate::query::WhereExpr;
use crate::store::Store;
use serde::Deserialize;
use serde_json::Value;

/// Parses a where expression for entities of `kind`; empty means "everything".
pub fn parse_where(kind: &str, expr: Option<&str>) -> Result<Option<WhereExpr>> {
    let Some(expr) = expr.filter(|e| !e.trim().is_empty()) else {
        return Ok(None);
    };
    let entity = crate::query::attrs::entity(kind)
        .ok_or_else(|| OpError::Internal(format!("no attributes for {kind}")))?;
    Ok(Some(WhereExpr::parse(expr, entity)?))
}

/// Serializes an entity to the JSON the API returns and where expressions see.
pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("entities serialize")
}

/// The body of a Space creation.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSpace {
    pub Slug: String,
    #[serde(default)]
    pub DisplayName: Option<String>,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
}

/// Creates a Space. Needs a grant on every Space (`*`) of at least Edit, or Admin.
pub async fn create_space(store: &Store, actor: &Actor, req: CreateSpace) -> Result<Space> {
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
    let mut space = Space::new(slug, req.Labels, req.Annotations)?;
    if let Some(d) = req.DisplayName {
        space.DisplayName = d;
    }
    let mut tx = store.write().await?;
    tx.insert(&space).await?;
    tx.commit().await?;
    Ok(space)
}

/// Reads a Space the actor may view.
pub async fn get_space(store: &Store, actor: &Actor, key: &str) -> Result<Space> {
    let mut tx = store.read().await?;
    let space = resolve::space(&mut tx, key).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::View)?;
    Ok(space)
}

/// Lists the Spaces the actor may view that match `where_`.
pub async fn list_spaces(store: &Store, actor: &Actor, where_: Option<&str>) -> Result<Vec<Space>> {
    let filter = parse_where("Space", where_)?;
    let mut tx = store.read().await?;
    let spaces = tx.list::<Space>(None).await?;
    Ok(spaces
        .into_iter()
        .filter(|s| actor.can_view(s.SpaceID))
        .filter(|s| filter.as_ref().is_none_or(|f| f.matches(&to_json(s))))
        .collect())
}

/// Changes to a Space; absent fields are left alone.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateSpace {
    /// The Version read; when present, a newer stored Version refuses the update.
    #[serde(default)]
    pub Version: Option<i64>,
    #[serde(default)]
    pub DisplayName: Option<String>,
    /// Labels to set (an empty value removes the label).
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    /// `space/target` or a Target UUID; empty string clears it.
    #[serde(default)]
    pub ReleaseTarget: Option<String>,
}

fn merge_labels(into: &mut Labels, changes: Labels) {
    for (k, v) in changes {
        if v.is_empty() {
            into.remove(&k);
        } else {
            into.insert(k, v);
        }
    }
}

/// Updates a Space's metadata. Needs Manage.
pub async fn update_space(store: &Store, actor: &Actor, key: &str, req: UpdateSpace) -> Result<Space> {
    let mut tx = store.write().await?;
    let mut space = resolve::space(&mut tx, key).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::Manage)?;
    if let Some(v) = req.Version {
        space.Version = v;
    }
    if let Some(d) = req.DisplayName {
        space.DisplayName = d;
    }
    merge_labels(&mut space.Labels, req.Labels);
    merge_labels(&mut space.Annotations, req.Annotations);
    validate_labels("Labels", &space.Labels)?;
    validate_labels("Annotations", &space.Annotations)?;
    if let Some(t) = req.ReleaseTarget {
        space.ReleaseTargetID = if t.is_empty() {
            None
        } else {
            let (target_space, target) = resolve::qualified::<Target>(&mut tx, &t, Some(&space)).await?;
            actor.require(target_space.SpaceID, target_space.Slug.as_str(), Permission::View)?;
            Some(target.TargetID)
        };
    }
    tx.update(&mut space).await?;
    tx.commit().await?;
    Ok(space)
}

/// Deletes an empty Space that no variant depends on. Needs Manage.
pub async fn delete_space(store: &Store, actor: &Actor, key: &str) -> Result<()> {
    let mut tx = store.write().await?;
    let space = resolve::space(&mut tx, key).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::Manage)?;
    let units = tx.list::<Unit>(Some(space.SpaceID)).await?;
    if !units.is_empty() {
        return Err(OpError::unprocessable(
            "Space",
            space.Slug.as_str(),
            format!("space '{}' still has {} unit(s); delete them first", space.Slug, units.len()),
        ));
    }
    if let Some(v) =
        tx.list::<Space>(None).await?.into_iter().find(|s| s.UpstreamSpaceID == Some(space.SpaceID))
    {
        return Err(OpError::unprocessable(
            "Space",
            space.Slug.as_str(),
            format!("space '{}' is the upstream of variant '{}'", space.Slug, v.Slug),
        ));
    }
    delete_all::<crate::model::Tag>(&mut tx, space.SpaceID).await?;
    delete_all::<crate::model::Link>(&mut tx, space.SpaceID).await?;
    delete_all::<crate::model::Filter>(&mut tx, space.SpaceID).await?;
    delete_all::<crate::model::Invocation>(&mut tx, space.SpaceID).await?;
    delete_all::<Target>(&mut tx, space.SpaceID).await?;
    delete_all::<crate::model::Release>(&mut tx, space.SpaceID).await?;
    tx.delete::<Space>(space.SpaceID).await?;
    tx.commit().await?;
    Ok(())
}

async fn delete_all<E: Entity>(tx: &mut crate::store::Tx, space: uuid::Uuid) -> Result<()> {
    for e in tx.list::<E>(Some(space)).await? {
        tx.delete::<E>(e.id()).await?;
    }
    Ok(())
}
