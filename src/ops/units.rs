//! Units and their revisions: create, update (optionally protecting what changed), read, list,
//! delete, data at a revision, conflicts.

use super::spaces::{parse_where, to_json};
use super::{Actor, OpError, Result, resolve};
use crate::model::{
    Labels, Permission, ProtectedPath, Revision, RevisionSource, Slug, Space, ToolchainType, Unit,
    ValidationError, data_hash, parse_stream, validate_labels,
};
use crate::store::{Store, Tx};
use chrono::Utc;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use uuid::Uuid;

/// Parses and checks Unit data for its toolchain; returns the documents.
pub fn validate_data(toolchain: ToolchainType, data: &str) -> Result<Vec<Value>> {
    let docs = parse_stream(data)?;
    let needs_mappings = matches!(toolchain, ToolchainType::KubernetesYaml | ToolchainType::DeckhandYaml);
    if let Some((i, _)) = docs.iter().enumerate().find(|(_, d)| needs_mappings && !d.is_object()) {
        return Err(OpError::invalid(
            "Data",
            format!("document {}", i + 1),
            format!("every {toolchain:?} document must be a mapping; document {} is not", i + 1),
        ));
    }
    Ok(docs)
}

/// Appends the next revision of `unit` and moves its head there. The caller writes `unit`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn append_revision(
    tx: &mut Tx,
    unit: &mut Unit,
    data: &str,
    source: RevisionSource,
    user: Uuid,
    description: &str,
    upstream_num: i64,
) -> Result<Revision> {
    let validation = match unit.ToolchainType {
        ToolchainType::DeckhandYaml => deckhand_errors(tx, unit, data).await?,
        _ => unit.ValidationErrors.clone(),
    };
    let rev = Revision {
        RevisionID: Uuid::new_v4(),
        UnitID: unit.UnitID,
        SpaceID: unit.SpaceID,
        RevisionNum: unit.HeadRevisionNum + 1,
        Description: description.to_string(),
        Source: source,
        UserID: user,
        DataHash: data_hash(data),
        DataSize: data.len() as i64,
        Tags: vec![],
        ChangeOrders: vec![],
        ValidationErrors: validation.clone(),
        UpstreamRevisionNum: upstream_num,
        CreatedAt: Utc::now(),
    };
    tx.insert_revision(&rev, data).await?;
    unit.ValidationErrors = validation;
    unit.HeadRevisionNum = rev.RevisionNum;
    unit.HeadRevisionID = rev.RevisionID;
    unit.DataHash = rev.DataHash.clone();
    unit.DataSize = rev.DataSize;
    unit.LastChangeDescription = description.to_string();
    Ok(rev)
}

/// For a Deckhand/YAML Unit: renders the Space's Deckhand Units together, with `data` as this
/// Unit's new content. A render error at one of this Unit's documents (or at none in particular)
/// becomes its validation error, naming the Deckhand error class; nothing else in the Space
/// changes.
async fn deckhand_errors(tx: &mut Tx, unit: &Unit, data: &str) -> Result<Vec<ValidationError>> {
    let own = parse_stream(data)?;
    let mut docs = own.clone();
    for other in tx.list::<Unit>(Some(unit.SpaceID)).await? {
        if other.UnitID == unit.UnitID
            || other.ToolchainType != ToolchainType::DeckhandYaml
            || other.HeadRevisionNum == 0
        {
            continue;
        }
        let (_, d) = tx.must_revision(other.UnitID, other.HeadRevisionNum).await?;
        docs.extend(parse_stream(&d)?);
    }
    let Err(e) = crate::layering::render(&docs, &crate::layering::RenderOptions::default()) else {
        return Ok(vec![]);
    };
    let mine = e.document().is_none_or(|d| {
        own.iter().any(|doc| doc["schema"] == d.schema.as_str() && doc["metadata"]["name"] == d.name.as_str())
    });
    if !mine {
        return Ok(vec![]);
    }
    Ok(vec![ValidationError {
        Source: "layering".into(),
        Resource: e.document().map(|d| d.to_string()).unwrap_or_default(),
        Path: e.path().unwrap_or_default().to_string(),
        Message: e.to_string(),
    }])
}

/// The body of a Unit creation.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateUnit {
    pub Slug: String,
    #[serde(default)]
    pub DisplayName: Option<String>,
    #[serde(default)]
    pub ToolchainType: Option<String>,
    pub Data: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    #[serde(default)]
    pub ChangeDescription: Option<String>,
}

/// Creates a Unit with its first revision. Needs Edit on the Space.
pub async fn create_unit(store: &Store, actor: &Actor, space: &str, req: CreateUnit) -> Result<Unit> {
    let slug = Slug::parse(&req.Slug)?;
    let toolchain: ToolchainType = match &req.ToolchainType {
        Some(t) => t.parse()?,
        None => ToolchainType::default(),
    };
    validate_labels("Labels", &req.Labels)?;
    validate_labels("Annotations", &req.Annotations)?;
    validate_data(toolchain, &req.Data)?;
    let mut tx = store.write().await?;
    let space = resolve::space(&mut tx, space).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::Edit)?;
    let now = Utc::now();
    let mut unit = Unit {
        UnitID: Uuid::new_v4(),
        SpaceID: space.SpaceID,
        DisplayName: req.DisplayName.unwrap_or_else(|| slug.to_string()),
        Slug: slug,
        Labels: req.Labels,
        Annotations: req.Annotations,
        ToolchainType: toolchain,
        HeadRevisionNum: 0,
        HeadRevisionID: Uuid::nil(),
        DataHash: String::new(),
        DataSize: 0,
        LastChangeDescription: String::new(),
        UpstreamUnitID: None,
        UpstreamSpaceID: None,
        UpstreamRevisionNum: 0,
        LastReleasedRevisionNum: 0,
        TargetID: None,
        ProtectedPaths: vec![],
        Conflicts: vec![],
        ValidationErrors: vec![],
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    let desc = req.ChangeDescription.unwrap_or_else(|| "created".into());
    append_revision(&mut tx, &mut unit, &req.Data, RevisionSource::CreateUnit, actor.id(), &desc, 0).await?;
    tx.insert(&unit).await?;
    tx.commit().await?;
    Ok(unit)
}

/// The body of a Unit data update.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateUnit {
    /// The Version read; when present, a newer stored Version refuses the update.
    #[serde(default)]
    pub Version: Option<i64>,
    #[serde(default)]
    pub Data: Option<String>,
    #[serde(default)]
    pub ChangeDescription: Option<String>,
    /// Marks every path this change writes as a local override that merges must not overwrite.
    #[serde(default)]
    pub Protect: bool,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
}

/// What an update did.
#[allow(non_snake_case)]
#[derive(Debug, serde::Serialize)]
pub struct UnitUpdated {
    pub Unit: Unit,
    /// The revision written, absent when the data did not change.
    pub Revision: Option<Revision>,
    /// Paths newly protected by this update.
    pub Protected: Vec<ProtectedPath>,
}

/// Updates a Unit's data and/or metadata. Writes a revision only when the data changes.
pub async fn update_unit(
    store: &Store,
    actor: &Actor,
    space: &str,
    unit: &str,
    req: UpdateUnit,
) -> Result<UnitUpdated> {
    let mut tx = store.write().await?;
    let space = resolve::space(&mut tx, space).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::Edit)?;
    let mut u = resolve::in_space::<Unit>(&mut tx, &space, unit).await?;
    if let Some(v) = req.Version {
        u.Version = v;
    }
    for (k, v) in req.Labels {
        if v.is_empty() {
            u.Labels.remove(&k)
        } else {
            u.Labels.insert(k, v)
        };
    }
    for (k, v) in req.Annotations {
        if v.is_empty() {
            u.Annotations.remove(&k)
        } else {
            u.Annotations.insert(k, v)
        };
    }
    validate_labels("Labels", &u.Labels)?;
    validate_labels("Annotations", &u.Annotations)?;
    let mut revision = None;
    let mut protected = vec![];
    if let Some(data) = &req.Data {
        let new_docs = validate_data(u.ToolchainType, data)?;
        if crate::model::data_hash(data) != u.DataHash {
            let (_, old) = tx.must_revision(u.UnitID, u.HeadRevisionNum).await?;
            let old_docs = parse_stream(&old)?;
            if req.Protect {
                for p in crate::merge::changed_paths(&old_docs, &new_docs) {
                    let p =
                        ProtectedPath { Resource: p.resource.as_str().to_string(), Path: p.path.to_string() };
                    if !u.ProtectedPaths.contains(&p) {
                        u.ProtectedPaths.push(p.clone());
                        protected.push(p);
                    }
                }
                u.ProtectedPaths.sort();
            }
            let desc = req.ChangeDescription.clone().unwrap_or_else(|| "updated".into());
            let upstream = u.UpstreamRevisionNum;
            revision = Some(
                append_revision(&mut tx, &mut u, data, RevisionSource::Update, actor.id(), &desc, upstream)
                    .await?,
            );
        }
    }
    tx.update(&mut u).await?;
    tx.commit().await?;
    Ok(UnitUpdated { Unit: u, Revision: revision, Protected: protected })
}

/// Reads a Unit.
pub async fn get_unit(store: &Store, actor: &Actor, space: &str, unit: &str) -> Result<Unit> {
    let mut tx = store.read().await?;
    let space = resolve::space(&mut tx, space).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::View)?;
    resolve::in_space::<Unit>(&mut tx, &space, unit).await
}

/// Lists Units of one Space (or every visible Space with `None`) matching `where_`, which may
/// reach the Unit's `Space.` and `UpstreamUnit.` attributes.
pub async fn list_units(
    store: &Store,
    actor: &Actor,
    space: Option<&str>,
    where_: Option<&str>,
) -> Result<Vec<Unit>> {
    let filter = parse_where("Unit", where_)?;
    let mut tx = store.read().await?;
    let scope = resolve::list_scope(&mut tx, actor, space).await?;
    let units: Vec<Unit> =
        tx.list::<Unit>(scope).await?.into_iter().filter(|u| actor.can_view(u.SpaceID)).collect();
    let Some(filter) = filter else {
        return Ok(units);
    };
    let relations = filter.relations();
    let spaces: HashMap<Uuid, Space> = if relations.contains(&"Space") {
        tx.list::<Space>(None).await?.into_iter().map(|s| (s.SpaceID, s)).collect()
    } else {
        HashMap::new()
    };
    let mut upstreams: HashMap<Uuid, Option<Unit>> = HashMap::new();
    let mut out = vec![];
    for u in units {
        let mut json = to_json(&u);
        if let Some(sp) = spaces.get(&u.SpaceID) {
            json["Space"] = to_json(sp);
        }
        if let (true, Some(up)) = (relations.contains(&"UpstreamUnit"), u.UpstreamUnitID) {
            if let std::collections::hash_map::Entry::Vacant(e) = upstreams.entry(up) {
                e.insert(tx.get::<Unit>(up).await?);
            }
            if let Some(Some(upu)) = upstreams.get(&up) {
                json["UpstreamUnit"] = to_json(upu);
            }
        }
        if filter.matches(&json) {
            out.push(u);
        }
    }
    Ok(out)
}

/// Deletes a Unit and its revisions. Refused while another Unit takes merges from it.
pub async fn delete_unit(store: &Store, actor: &Actor, space: &str, unit: &str) -> Result<()> {
    let mut tx = store.write().await?;
    let space = resolve::space(&mut tx, space).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::Edit)?;
    let u = resolve::in_space::<Unit>(&mut tx, &space, unit).await?;
    if let Some(l) = tx.list::<crate::model::Link>(None).await?.into_iter().find(|l| l.ToUnitID == u.UnitID) {
        return Err(OpError::unprocessable(
            "Unit",
            u.Slug.as_str(),
            format!("unit '{}' is the upstream of link '{}'; delete the downstream first", u.Slug, l.Slug),
        ));
    }
    for l in tx.list::<crate::model::Link>(Some(space.SpaceID)).await? {
        if l.FromUnitID == u.UnitID {
            tx.delete::<crate::model::Link>(l.LinkID).await?;
        }
    }
    tx.delete::<Unit>(u.UnitID).await?;
    tx.commit().await?;
    Ok(())
}

/// A Unit's data at `revision` (its head when `None`).
pub async fn unit_data(
    store: &Store,
    actor: &Actor,
    space: &str,
    unit: &str,
    revision: Option<i64>,
) -> Result<String> {
    let u = get_unit(store, actor, space, unit).await?;
    let mut tx = store.read().await?;
    let num = revision.unwrap_or(u.HeadRevisionNum);
    let (_, data) = tx
        .revision(u.UnitID, num)
        .await?
        .ok_or_else(|| OpError::NotFound { kind: "Revision", key: format!("{}#{num}", u.Slug) })?;
    Ok(data)
}

/// A Unit's revisions, oldest first.
pub async fn list_revisions(store: &Store, actor: &Actor, space: &str, unit: &str) -> Result<Vec<Revision>> {
    let u = get_unit(store, actor, space, unit).await?;
    let mut tx = store.read().await?;
    Ok(tx.revisions(u.UnitID).await?)
}
