//! ChangeOrders: create (deriving coverage and scope), read with State derived, update (abort,
//! scope), delete (taking its marks back). Promotion and undo are in `promote.rs`.

use super::spaces::{parse_where, to_json};
use super::{Actor, OpError, Result, resolve};
use crate::changeorder::{BaseUnit, ScopeError, check_hops, derive_coverage, reach};
use crate::model::{
    ChangeOrder, ChangeOrderType, ChangeOrderView, ChangeWorkflow, Filter, Invocation, Labels, Link,
    Permission, Slug, Space, Tag, Unit, UpdateType,
};
use crate::store::{MarkKind, Store, Tx};
use chrono::Utc;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use uuid::Uuid;

/// The body of a ChangeOrder creation.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateChangeOrder {
    pub Slug: String,
    #[serde(default)]
    pub Description: String,
    /// `UpgradeUnit` (default), `MergeUnits` or `Invoke`.
    #[serde(default)]
    pub UpdateType: Option<String>,
    /// Spaces by slug or UUID.
    #[serde(default)]
    pub InScopeSpaces: Vec<String>,
    #[serde(default)]
    pub WhereSpace: String,
    /// A Filter over Spaces, `space/slug`.
    #[serde(default)]
    pub SpaceFilter: Option<String>,
    /// Adopt this Tag's marks as the end of the change.
    #[serde(default)]
    pub EndTag: Option<String>,
    /// Invoke only: `space/slug` of the Invocation, its parameters, and the Units it covers.
    #[serde(default)]
    pub Invocation: Option<String>,
    #[serde(default)]
    pub Parameters: BTreeMap<String, String>,
    #[serde(default)]
    pub WhereUnit: String,
    #[serde(default)]
    pub UnitFilter: Option<String>,
    #[serde(default)]
    pub Labels: Labels,
    /// `space/slug` of the ChangeWorkflow to promote under; its definition is copied on.
    #[serde(default)]
    pub ChangeWorkflow: Option<String>,
}

/// The Link type a ChangeOrder follows; `None` for Invoke.
pub(crate) fn co_link_type(t: ChangeOrderType) -> Option<UpdateType> {
    match t {
        ChangeOrderType::UpgradeUnit => Some(UpdateType::UpgradeUnit),
        ChangeOrderType::MergeUnits => Some(UpdateType::MergeUnits),
        ChangeOrderType::Invoke => None,
    }
}

fn parse_type(s: Option<&str>) -> Result<ChangeOrderType> {
    match s.unwrap_or("UpgradeUnit") {
        "UpgradeUnit" => Ok(ChangeOrderType::UpgradeUnit),
        "MergeUnits" => Ok(ChangeOrderType::MergeUnits),
        "Invoke" => Ok(ChangeOrderType::Invoke),
        other => Err(OpError::invalid("UpdateType", other, "expected UpgradeUnit, MergeUnits or Invoke")),
    }
}

/// A Filter of entity kind `from`, named `space/slug` or by slug in `base`.
async fn filter_of(tx: &mut Tx, key: &str, base: &Space, from: &str, field: &str) -> Result<Filter> {
    let (_, f) = resolve::qualified::<Filter>(tx, key, Some(base)).await?;
    if f.From != from {
        return Err(OpError::invalid(field, key, format!("filter '{key}' selects {}, not {from}", f.From)));
    }
    Ok(f)
}

/// Evaluates a Space selection (where expression AND filter) with the writer's permissions.
async fn select_spaces(
    tx: &mut Tx,
    actor: &Actor,
    where_: &str,
    filter: Option<&Filter>,
) -> Result<Vec<Uuid>> {
    let w = parse_where("Space", Some(where_)).map_err(|e| rename_field(e, "WhereSpace"))?;
    let f = match filter {
        Some(f) => parse_where("Space", Some(&f.Where))?,
        None => None,
    };
    Ok(tx
        .list::<Space>(None)
        .await?
        .into_iter()
        .filter(|s| actor.can_view(s.SpaceID))
        .filter(|s| {
            let j = to_json(s);
            w.as_ref().is_none_or(|w| w.matches(&j)) && f.as_ref().is_none_or(|f| f.matches(&j))
        })
        .map(|s| s.SpaceID)
        .collect())
}

fn rename_field(e: OpError, field: &str) -> OpError {
    match e {
        OpError::Invalid(mut f) => {
            f.field = field.to_string();
            OpError::Invalid(f)
        }
        other => other,
    }
}

/// Works out `InScopeSpaceIDs` from an explicit list, a selection, or the Links' reach, and
/// refuses a scope that skips a hop.
async fn derive_scope(
    tx: &mut Tx,
    actor: &Actor,
    co: &ChangeOrder,
    list: Option<Vec<Uuid>>,
    filter: Option<&Filter>,
) -> Result<Vec<Uuid>> {
    let selecting = !co.WhereSpace.trim().is_empty() || filter.is_some();
    let mut scope = match (list, selecting) {
        (Some(l), true) if !l.is_empty() => {
            return Err(OpError::invalid(
                "InScopeSpaces",
                "",
                "a selection (WhereSpace/SpaceFilter) is set, so the server writes the scope; drop the list or the selection",
            ));
        }
        (_, true) => select_spaces(tx, actor, &co.WhereSpace, filter).await?,
        (Some(l), false) if !l.is_empty() => l,
        _ => match co_link_type(co.UpdateType) {
            Some(t) => reach(co.SpaceID, &tx.space_edges(t).await?),
            None => {
                return Err(OpError::invalid(
                    "InScopeSpaces",
                    "",
                    "an Invoke ChangeOrder needs its Spaces: --in-scope-space, --where-space or --space-filter",
                ));
            }
        },
    };
    scope.retain(|s| *s != co.SpaceID);
    scope.sort();
    scope.dedup();
    if let Some(t) = co_link_type(co.UpdateType) {
        let edges = tx.space_edges(t).await?;
        let names: HashMap<Uuid, String> =
            tx.list::<Space>(None).await?.into_iter().map(|s| (s.SpaceID, s.Slug.to_string())).collect();
        let name = |id: Uuid| names.get(&id).cloned().unwrap_or_else(|| id.to_string());
        check_hops(co.SpaceID, &scope, &edges, name).map_err(|e| {
            let space = match &e {
                ScopeError::SkipsHop { space, .. } | ScopeError::Unreachable { space, .. } => space.clone(),
            };
            OpError::unprocessable("InScopeSpaceIDs", space, e.to_string())
        })?;
    }
    Ok(scope)
}

/// Derives each base Unit's interval and marks it: start and end Tags, the ChangeOrder on every
/// revision in (start, end]. Replaces marks a previous derivation left in the base Space.
async fn cover(tx: &mut Tx, co: &mut ChangeOrder, base: &Space) -> Result<()> {
    let Some(t) = co_link_type(co.UpdateType) else { return Ok(()) };
    let scope: HashSet<Uuid> = co.InScopeSpaceIDs.iter().copied().collect();
    let spaces: HashMap<Uuid, String> =
        tx.list::<Space>(None).await?.into_iter().map(|s| (s.SpaceID, s.Slug.to_string())).collect();
    let taken: HashSet<Uuid> =
        tx.marked(MarkKind::Tag, co.EndTagID).await?.into_iter().map(|m| m.unit).collect();
    let mut cursors: HashMap<Uuid, Vec<(String, i64)>> = HashMap::new();
    for l in tx.links_into_space(base.SpaceID).await? {
        // Downstreams that already took the change no longer say where it starts.
        if l.UpdateType == t && scope.contains(&l.SpaceID) && !taken.contains(&l.FromUnitID) {
            let name = spaces.get(&l.SpaceID).cloned().unwrap_or_default();
            cursors.entry(l.ToUnitID).or_default().push((name, l.UpstreamLastMergedRevisionNum));
        }
    }
    let adopted = match co.AdoptedEndTagID {
        Some(tag) => Some(tx.tag_heads(tag).await?),
        None => None,
    };
    let units = tx.list::<Unit>(Some(base.SpaceID)).await?;
    let base_units: Vec<BaseUnit> = units
        .iter()
        .map(|u| BaseUnit {
            id: u.UnitID,
            slug: u.Slug.to_string(),
            head: u.HeadRevisionNum,
            downstream_cursors: cursors.remove(&u.UnitID).unwrap_or_default(),
            adopted_end: adopted.as_ref().and_then(|a| a.get(&u.UnitID)).map(|m| m.revision_num),
        })
        .collect();
    let previous: HashMap<Uuid, (i64, i64)> =
        co.CoveredUnits.iter().map(|c| (c.UnitID, (c.StartRevisionNum, c.EndRevisionNum))).collect();
    let mut coverage = derive_coverage(&base_units, co.AdoptedEndTagID.is_some()).map_err(|e| {
        OpError::unprocessable("Unit", e.to_string().split('\'').nth(1).unwrap_or(""), e.to_string())
    })?;
    for c in &mut coverage.covered {
        // A re-derivation keeps the end fixed at creation.
        if let Some((_, end)) = previous.get(&c.UnitID) {
            c.EndRevisionNum = *end;
            c.StartRevisionNum = c.StartRevisionNum.min(*end);
        }
    }
    for u in &units {
        tx.unmark(MarkKind::Tag, co.StartTagID, Some(u.UnitID)).await?;
        tx.unmark(MarkKind::ChangeOrder, co.ChangeOrderID, Some(u.UnitID)).await?;
        if previous.is_empty() {
            tx.unmark(MarkKind::Tag, co.EndTagID, Some(u.UnitID)).await?;
        }
    }
    for c in &coverage.covered {
        if c.StartRevisionNum > 0 {
            tx.mark(MarkKind::Tag, co.StartTagID, base.SpaceID, c.UnitID, c.StartRevisionNum).await?;
        }
        tx.mark(MarkKind::Tag, co.EndTagID, base.SpaceID, c.UnitID, c.EndRevisionNum).await?;
        for n in c.StartRevisionNum + 1..=c.EndRevisionNum {
            tx.mark(MarkKind::ChangeOrder, co.ChangeOrderID, base.SpaceID, c.UnitID, n).await?;
        }
    }
    co.CoveredUnits = coverage.covered;
    co.SkippedUnits = coverage.skipped;
    Ok(())
}

fn new_tag(space: Uuid, slug: Slug, co: Uuid) -> Tag {
    let now = Utc::now();
    Tag {
        TagID: Uuid::new_v4(),
        SpaceID: space,
        DisplayName: slug.to_string(),
        Slug: slug,
        Labels: Labels::new(),
        Annotations: Labels::new(),
        ChangeOrderID: Some(co),
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    }
}

async fn resolve_spaces(tx: &mut Tx, actor: &Actor, keys: &[String]) -> Result<Vec<Uuid>> {
    let mut out = vec![];
    for k in keys.iter().flat_map(|k| k.split(',')).map(str::trim).filter(|k| !k.is_empty()) {
        let s = resolve::space(tx, k).await?;
        actor.require(s.SpaceID, s.Slug.as_str(), Permission::View)?;
        out.push(s.SpaceID);
    }
    Ok(out)
}

/// Creates a ChangeOrder in its base Space: scope, coverage, Tags and marks in one transaction.
pub async fn create_change_order(
    store: &Store,
    actor: &Actor,
    space: &str,
    req: CreateChangeOrder,
) -> Result<ChangeOrderView> {
    let slug = Slug::parse(&req.Slug)?;
    let start_slug = Slug::parse_field("Slug", &format!("{slug}-co-start")).map_err(|_| {
        OpError::invalid("Slug", slug.as_str(), "too long: its tags add '-co-start' (at most 119 characters)")
    })?;
    let end_slug = Slug::parse(&format!("{slug}-co-end"))?;
    let update_type = parse_type(req.UpdateType.as_deref())?;
    if update_type != ChangeOrderType::Invoke
        && (req.Invocation.is_some()
            || !req.WhereUnit.is_empty()
            || req.UnitFilter.is_some()
            || !req.Parameters.is_empty())
    {
        return Err(OpError::invalid(
            "UpdateType",
            update_type.to_string(),
            "Invocation, Parameters, WhereUnit and UnitFilter belong to --update-type Invoke",
        ));
    }
    if update_type == ChangeOrderType::Invoke && req.EndTag.is_some() {
        return Err(OpError::invalid(
            "EndTag",
            req.EndTag.clone().unwrap_or_default(),
            "an Invoke ChangeOrder has no end tag to adopt",
        ));
    }
    let mut tx = store.write().await?;
    let base = resolve::space(&mut tx, space).await?;
    actor.require(base.SpaceID, base.Slug.as_str(), Permission::Edit)?;
    let now = Utc::now();
    let co_id = Uuid::new_v4();
    let (start_tag, end_tag) =
        (new_tag(base.SpaceID, start_slug, co_id), new_tag(base.SpaceID, end_slug, co_id));
    let mut co = ChangeOrder {
        ChangeOrderID: co_id,
        SpaceID: base.SpaceID,
        DisplayName: slug.to_string(),
        Slug: slug,
        Description: req.Description.clone(),
        Labels: req.Labels.clone(),
        Annotations: Labels::new(),
        UpdateType: update_type,
        StartTagID: start_tag.TagID,
        EndTagID: end_tag.TagID,
        AdoptedEndTagID: None,
        RestoreTagID: None,
        InScopeSpaceIDs: vec![],
        WhereSpace: req.WhereSpace.clone(),
        SpaceFilterID: None,
        WhereUnit: req.WhereUnit.clone(),
        UnitFilterID: None,
        InvocationID: None,
        Parameters: req.Parameters.clone(),
        CoveredUnits: vec![],
        SkippedUnits: vec![],
        AbortedReason: String::new(),
        ChangeWorkflowID: None,
        ChangeWorkflow: None,
        Stage: String::new(),
        PromotionOverrides: vec![],
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    if let Some(t) = &req.EndTag {
        let (_, tag) = resolve::qualified::<Tag>(&mut tx, t, Some(&base)).await?;
        co.AdoptedEndTagID = Some(tag.TagID);
    }
    let space_filter = match &req.SpaceFilter {
        Some(f) => Some(filter_of(&mut tx, f, &base, "Space", "SpaceFilter").await?),
        None => None,
    };
    co.SpaceFilterID = space_filter.as_ref().map(|f| f.FilterID);
    if update_type == ChangeOrderType::Invoke {
        let key = req.Invocation.as_deref().ok_or_else(|| {
            OpError::invalid("Invocation", "", "an Invoke ChangeOrder needs --invocation space/slug")
        })?;
        let (inv_space, inv) = resolve::qualified::<Invocation>(&mut tx, key, Some(&base)).await?;
        actor.require(inv_space.SpaceID, inv_space.Slug.as_str(), Permission::View)?;
        super::bind_invocation(&inv, &req.Parameters)?;
        parse_where("Unit", Some(&req.WhereUnit)).map_err(|e| rename_field(e, "WhereUnit"))?;
        if let Some(f) = &req.UnitFilter {
            co.UnitFilterID = Some(filter_of(&mut tx, f, &base, "Unit", "UnitFilter").await?.FilterID);
        }
        co.InvocationID = Some(inv.InvocationID);
    }
    let mut list = resolve_spaces(&mut tx, actor, &req.InScopeSpaces).await?;
    if let Some(w) = &req.ChangeWorkflow {
        let (wf_space, wf) = resolve::qualified::<ChangeWorkflow>(&mut tx, w, Some(&base)).await?;
        actor.require(wf_space.SpaceID, wf_space.Slug.as_str(), Permission::View)?;
        co.ChangeWorkflowID = Some(wf.ChangeWorkflowID);
        co.ChangeWorkflow = Some(serde_json::to_value(wf.spec()).expect("specs serialize"));
        // With no list or selection, the scope is every Space some Stage selects.
        if list.is_empty() && co.WhereSpace.trim().is_empty() && space_filter.is_none() {
            let staged = super::stages::staged(&mut tx, &co).await?.expect("a workflow was just set");
            list = staged.stages.iter().flatten().map(|s| s.SpaceID).collect();
        }
    }
    co.InScopeSpaceIDs = derive_scope(&mut tx, actor, &co, Some(list), space_filter.as_ref()).await?;
    tx.insert(&start_tag).await?;
    tx.insert(&end_tag).await?;
    cover(&mut tx, &mut co, &base).await?;
    tx.insert(&co).await?;
    let view = super::co_state::view_change_order(&mut tx, co).await?;
    tx.commit().await?;
    Ok(view)
}

/// Reads a ChangeOrder with its derived sets and State.
pub async fn get_change_order(
    store: &Store,
    actor: &Actor,
    space: &str,
    key: &str,
) -> Result<ChangeOrderView> {
    let mut tx = store.read().await?;
    let base = resolve::space(&mut tx, space).await?;
    actor.require(base.SpaceID, base.Slug.as_str(), Permission::View)?;
    let co = resolve::in_space::<ChangeOrder>(&mut tx, &base, key).await?;
    super::co_state::view_change_order(&mut tx, co).await
}

/// Lists ChangeOrders (of one Space, or every visible one) whose derived view matches `where_`.
pub async fn list_change_orders(
    store: &Store,
    actor: &Actor,
    space: Option<&str>,
    where_: Option<&str>,
) -> Result<Vec<ChangeOrderView>> {
    let filter = parse_where("ChangeOrder", where_)?;
    let mut tx = store.read().await?;
    let scope = resolve::list_scope(&mut tx, actor, space).await?;
    let mut out = vec![];
    for co in tx.list::<ChangeOrder>(scope).await? {
        if !actor.can_view(co.SpaceID) {
            continue;
        }
        let v = super::co_state::view_change_order(&mut tx, co).await?;
        if filter.as_ref().is_none_or(|f| f.matches(&to_json(&v))) {
            out.push(v);
        }
    }
    Ok(out)
}

/// Changes to a ChangeOrder. Absent fields are left alone.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateChangeOrder {
    #[serde(default)]
    pub Version: Option<i64>,
    #[serde(default)]
    pub Description: Option<String>,
    /// Non-empty aborts; empty puts it back on its way (refused once anything was restored).
    #[serde(default)]
    pub AbortedReason: Option<String>,
    #[serde(default)]
    pub InScopeSpaces: Option<Vec<String>>,
    /// `-` or empty clears it.
    #[serde(default)]
    pub WhereSpace: Option<String>,
    #[serde(default)]
    pub SpaceFilter: Option<String>,
    /// Re-evaluate the selection, taking in Spaces that match since.
    #[serde(default)]
    pub RefreshSpaces: bool,
}

/// Updates a ChangeOrder; a scope change re-derives what it covers. Needs Edit on its Space.
pub async fn update_change_order(
    store: &Store,
    actor: &Actor,
    space: &str,
    key: &str,
    req: UpdateChangeOrder,
) -> Result<ChangeOrderView> {
    let mut tx = store.write().await?;
    let base = resolve::space(&mut tx, space).await?;
    actor.require(base.SpaceID, base.Slug.as_str(), Permission::Edit)?;
    let mut co = resolve::in_space::<ChangeOrder>(&mut tx, &base, key).await?;
    if let Some(v) = req.Version {
        co.Version = v;
    }
    if let Some(d) = req.Description {
        co.Description = d;
    }
    if let Some(r) = req.AbortedReason {
        if r.trim().is_empty() && co.RestoreTagID.is_some() {
            return Err(OpError::unprocessable(
                "AbortedReason",
                "",
                format!(
                    "change order '{}' has been undone in some space; create a new change order instead",
                    co.Slug
                ),
            ));
        }
        co.AbortedReason = r.trim().to_string();
    }
    let mut rescope = req.RefreshSpaces;
    if let Some(w) = req.WhereSpace {
        co.WhereSpace = if w == "-" { String::new() } else { w };
        rescope = true;
    }
    if let Some(f) = &req.SpaceFilter {
        co.SpaceFilterID = match f.as_str() {
            "" | "-" => None,
            f => Some(filter_of(&mut tx, f, &base, "Space", "SpaceFilter").await?.FilterID),
        };
        rescope = true;
    }
    let list = match &req.InScopeSpaces {
        Some(l) => {
            rescope = true;
            Some(resolve_spaces(&mut tx, actor, l).await?)
        }
        None => None,
    };
    if rescope {
        let filter = match co.SpaceFilterID {
            Some(id) => tx.get::<Filter>(id).await?,
            None => None,
        };
        let keep = list.or_else(|| {
            (co.WhereSpace.is_empty() && co.SpaceFilterID.is_none()).then(|| co.InScopeSpaceIDs.clone())
        });
        co.InScopeSpaceIDs = derive_scope(&mut tx, actor, &co, keep, filter.as_ref()).await?;
        cover(&mut tx, &mut co, &base).await?;
    }
    tx.update(&mut co).await?;
    let view = super::co_state::view_change_order(&mut tx, co).await?;
    tx.commit().await?;
    Ok(view)
}

/// Deletes a ChangeOrder: it leaves every revision, its own Tags are removed and deleted; an
/// adopted Tag is never touched.
pub async fn delete_change_order(store: &Store, actor: &Actor, space: &str, key: &str) -> Result<()> {
    let mut tx = store.write().await?;
    let base = resolve::space(&mut tx, space).await?;
    actor.require(base.SpaceID, base.Slug.as_str(), Permission::Edit)?;
    let co = resolve::in_space::<ChangeOrder>(&mut tx, &base, key).await?;
    tx.unmark(MarkKind::ChangeOrder, co.ChangeOrderID, None).await?;
    for tag in [Some(co.StartTagID), Some(co.EndTagID), co.RestoreTagID].into_iter().flatten() {
        tx.unmark(MarkKind::Tag, tag, None).await?;
        tx.delete::<Tag>(tag).await?;
    }
    tx.delete::<ChangeOrder>(co.ChangeOrderID).await?;
    tx.commit().await?;
    Ok(())
}

/// The Links of the ChangeOrder's type in `space`, by downstream Unit.
pub(crate) async fn links_by_unit(tx: &mut Tx, space: Uuid, t: UpdateType) -> Result<HashMap<Uuid, Link>> {
    Ok(tx
        .list::<Link>(Some(space))
        .await?
        .into_iter()
        .filter(|l| l.UpdateType == t)
        .map(|l| (l.FromUnitID, l))
        .collect())
}
