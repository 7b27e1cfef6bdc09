//! Naming entities the way users do: by Slug, `space/slug`, or UUID.

use super::{OpError, Result};
use crate::model::{Entity, Space};
use crate::store::Tx;
use uuid::Uuid;

/// A UUID if `s` parses as one, else a Slug.
pub fn parse_key(s: &str) -> std::result::Result<Uuid, &str> {
    Uuid::parse_str(s).map_err(|_| s)
}

/// The Space named by Slug or UUID.
pub(crate) async fn space(tx: &mut Tx, key: &str) -> Result<Space> {
    let found = match parse_key(key) {
        Ok(id) => tx.get::<Space>(id).await?,
        Err(slug) => tx.find::<Space>(None, slug).await?,
    };
    found.ok_or_else(|| OpError::NotFound { kind: "Space", key: key.to_string() })
}

/// An entity of `space` named by Slug or UUID.
pub(crate) async fn in_space<E: Entity>(tx: &mut Tx, space: &Space, key: &str) -> Result<E> {
    let found = match parse_key(key) {
        Ok(id) => tx.get::<E>(id).await?.filter(|e| e.space_id() == Some(space.SpaceID)),
        Err(slug) => tx.find::<E>(Some(space.SpaceID), slug).await?,
    };
    found.ok_or_else(|| OpError::NotFound { kind: E::KIND, key: format!("{}/{key}", space.Slug) })
}

/// The container a list covers: one Space the actor may view, or every Space (`None`, `*`).
pub(crate) async fn list_scope(
    tx: &mut Tx,
    actor: &super::Actor,
    space: Option<&str>,
) -> Result<Option<Uuid>> {
    match space {
        Some(s) if s != "*" => {
            let sp = self::space(tx, s).await?;
            actor.require(sp.SpaceID, sp.Slug.as_str(), crate::model::Permission::View)?;
            Ok(Some(sp.SpaceID))
        }
        _ => Ok(None),
    }
}

/// An entity named `space/slug` (or by UUID, or by slug in `default_space`).
pub(crate) async fn qualified<E: Entity>(
    tx: &mut Tx,
    key: &str,
    default_space: Option<&Space>,
) -> Result<(Space, E)> {
    if let Some((s, k)) = key.split_once('/') {
        let sp = space(tx, s).await?;
        let e = in_space::<E>(tx, &sp, k).await?;
        return Ok((sp, e));
    }
    if let Ok(id) = Uuid::parse_str(key) {
        let e = tx.get::<E>(id).await?.ok_or_else(|| OpError::NotFound { kind: E::KIND, key: key.into() })?;
        let sp_id = e.space_id().ok_or_else(|| OpError::NotFound { kind: E::KIND, key: key.into() })?;
        let sp = tx.must_get::<Space>(sp_id).await?;
        return Ok((sp, e));
    }
    match default_space {
        Some(sp) => Ok((sp.clone(), in_space::<E>(tx, sp, key).await?)),
        None => Err(OpError::invalid(E::KIND, key, "name it as space/slug or by UUID")),
    }
}
