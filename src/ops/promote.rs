//! Promoting a ChangeOrder into Spaces (one transaction per Space, planned from a snapshot
//! inside that transaction) and undoing it in one.

use super::changeorders::{co_link_type, links_by_unit};
use super::upgrade::merge_through;
use super::variants::clone_unit;
use super::{Actor, OpError, Result, resolve};
use crate::changeorder::{
    DownstreamUnit, Outcome, Plan, SkipReason, Snapshot, UnitPlan, UpstreamUnit, hop_order, plan_promotion,
};
use crate::model::{
    ChangeOrder, ChangeOrderType, Invocation, Labels, Permission, RevisionSource, Slug, Space, Tag, Unit,
    data_hash,
};
use crate::store::{MarkKind, Store, Tx};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// The body of a ChangeOrder promotion.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromoteChangeOrder {
    /// One Space to promote into; absent: every Space in scope that has not taken it, hop by hop.
    #[serde(default)]
    pub Space: Option<String>,
    #[serde(default)]
    pub DryRun: bool,
    /// The digest a dry run returned: if the plan has changed since, nothing is written (412).
    #[serde(default)]
    pub ExpectedPlan: Option<String>,
    /// Under a workflow: promote every Stage up to this one (default: the next unreached Stage).
    /// Each Stage's entry gates are checked on the way; none is skipped.
    #[serde(default)]
    pub TargetStage: Option<String>,
    /// Promote past failing entry gates (needs Manage on the ChangeOrder's Space and a Reason);
    /// recorded in the ChangeOrder's PromotionOverrides.
    #[serde(default)]
    pub Force: bool,
    #[serde(default)]
    pub Reason: Option<String>,
}

/// A Stage a promotion entered, with its entry gates' verdicts.
#[allow(non_snake_case)]
#[derive(Debug, Serialize)]
pub struct StagePromotion {
    pub Name: String,
    pub Forced: bool,
    pub Gates: Vec<crate::gates::Verdict>,
}

/// What happened in one Space.
#[allow(non_snake_case)]
#[derive(Debug, Serialize)]
pub struct SpacePromotion {
    pub Space: String,
    pub SpaceID: Uuid,
    pub Plan: Plan,
    /// Written (false on a dry run or a failure).
    pub Applied: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub Error: Option<String>,
}

/// The result of a promotion request.
#[allow(non_snake_case)]
#[derive(Debug, Serialize)]
pub struct PromoteResult {
    pub ChangeOrder: String,
    pub DryRun: bool,
    /// Every Space asked for was promoted.
    pub Complete: bool,
    /// Under a workflow: the Stages entered and their gates.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub Stages: Vec<StagePromotion>,
    pub Spaces: Vec<SpacePromotion>,
    /// The Stage the ChangeOrder has reached afterwards (or `Completed`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub Stage: String,
}

/// Test hooks: simulate a crash part way through applying a Space.
#[derive(Debug, Default, Clone)]
pub struct PromoteHooks {
    /// Fail (rolling the Space back) after applying this many Units.
    pub fail_after_units: Option<usize>,
}

/// The one Space a promotion names, refused unless it is in the ChangeOrder's scope.
pub(crate) async fn scoped_target(tx: &mut Tx, co: &ChangeOrder, key: Option<&str>) -> Result<Option<Space>> {
    let Some(key) = key else { return Ok(None) };
    let t = resolve::space(tx, key).await?;
    if !co.InScopeSpaceIDs.contains(&t.SpaceID) {
        return Err(OpError::unprocessable(
            "Space",
            t.Slug.as_str(),
            format!("space '{}' is not in the scope of change order '{}'", t.Slug, co.Slug),
        ));
    }
    Ok(Some(t))
}

/// The Stage of the ChangeOrder's workflow holding a named target Space.
pub(crate) fn stage_of_target(st: &super::stages::Staged, co: &ChangeOrder, t: &Space) -> Result<usize> {
    st.stage_of(t.SpaceID).ok_or_else(|| {
        OpError::unprocessable(
            "Space",
            t.Slug.as_str(),
            format!("space '{}' is in no Stage of change order '{}''s workflow", t.Slug, co.Slug),
        )
    })
}

pub(crate) fn refuse_aborted(co: &ChangeOrder) -> Result<()> {
    if co.AbortedReason.is_empty() {
        return Ok(());
    }
    Err(OpError::unprocessable(
        "ChangeOrder",
        co.Slug.as_str(),
        format!("change order '{}' is aborted ({}): it is not promoted anywhere", co.Slug, co.AbortedReason),
    ))
}

/// Promotes a ChangeOrder. Without a workflow: into one Space or, with none named, into every
/// Space in scope that has not taken it, in hop order, stopping at the first Space that fails.
/// Under a workflow: Stage by Stage, each Stage's entry gates evaluated from current state first.
pub async fn promote_change_order(
    store: &Store,
    actor: &Actor,
    space: &str,
    key: &str,
    req: PromoteChangeOrder,
    hooks: &PromoteHooks,
) -> Result<PromoteResult> {
    if req.Force && req.Reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(OpError::invalid(
            "Reason",
            "",
            "--force needs --reason: a forced promotion is recorded with why",
        ));
    }
    let (co, staged, target) = {
        let mut tx = store.read().await?;
        let base = resolve::space(&mut tx, space).await?;
        actor.require(base.SpaceID, base.Slug.as_str(), Permission::View)?;
        if req.Force {
            actor.require(base.SpaceID, base.Slug.as_str(), Permission::Manage)?;
        }
        let co = resolve::in_space::<ChangeOrder>(&mut tx, &base, key).await?;
        refuse_aborted(&co)?;
        let target = scoped_target(&mut tx, &co, req.Space.as_deref()).await?;
        (co.clone(), super::stages::staged(&mut tx, &co).await?, target)
    };
    if req.ExpectedPlan.is_some() && target.is_none() {
        return Err(OpError::invalid("ExpectedPlan", "", "an expected plan digest pins one Space: name it"));
    }
    let mut out = PromoteResult {
        ChangeOrder: co.Slug.to_string(),
        DryRun: req.DryRun,
        Complete: true,
        Stages: vec![],
        Spaces: vec![],
        Stage: String::new(),
    };
    match staged {
        None if req.TargetStage.is_some() => {
            return Err(OpError::invalid(
                "TargetStage",
                req.TargetStage.clone().unwrap_or_default(),
                format!("change order '{}' has no ChangeWorkflow, so it has no Stages", co.Slug),
            ));
        }
        None => {
            let targets = match &target {
                Some(t) => vec![t.SpaceID],
                None => waiting(&mut store.read().await?, &co, None).await?,
            };
            promote_spaces(store, actor, &co, targets, &req, hooks, target.is_some(), &mut out).await?;
        }
        Some(st) => {
            let stages: Vec<usize> = match (&target, &req.TargetStage) {
                (Some(t), _) => vec![stage_of_target(&st, &co, t)?],
                (None, named) => {
                    stages_to_promote(&mut store.read().await?, &co, &st, named.as_deref()).await?
                }
            };
            for k in stages {
                let name = st.wf.stages()[k].name().to_string();
                let verdicts = {
                    let mut tx = store.read().await?;
                    super::stages::entry_verdicts(&mut tx, &co, &st, k).await?
                };
                let failing: Vec<&crate::gates::Verdict> = crate::gates::failing(&verdicts);
                let forced = !failing.is_empty() && req.Force;
                if !failing.is_empty() && !req.Force {
                    let promoted: Vec<&str> = out.Stages.iter().map(|s| s.Name.as_str()).collect();
                    return Err(OpError::GatesClosed {
                        stage: name.clone(),
                        message: format!(
                            "{}entry into stage '{name}' is refused: {}",
                            if promoted.is_empty() {
                                String::new()
                            } else {
                                format!("promoted {}; ", promoted.join(", "))
                            },
                            failing.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; ")
                        ),
                        gates: serde_json::to_value(&verdicts).expect("verdicts serialize"),
                    });
                }
                if forced && !req.DryRun {
                    record_override(
                        store,
                        actor,
                        co.ChangeOrderID,
                        &name,
                        &failing,
                        req.Reason.as_deref().unwrap_or(""),
                    )
                    .await?;
                }
                out.Stages.push(StagePromotion { Name: name, Forced: forced, Gates: verdicts });
                let targets = match &target {
                    Some(t) => vec![t.SpaceID],
                    None => waiting(&mut store.read().await?, &co, Some(&st.stages[k])).await?,
                };
                promote_spaces(store, actor, &co, targets, &req, hooks, target.is_some(), &mut out).await?;
                if !out.Complete {
                    break;
                }
            }
        }
    }
    if !req.DryRun {
        super::stages::refresh_stage(store, co.ChangeOrderID).await?;
        out.Stage = store.read().await?.must_get::<ChangeOrder>(co.ChangeOrderID).await?.Stage;
    }
    Ok(out)
}

/// The Spaces (of `among`, or of the whole scope) still waiting for the change, in hop order.
pub(crate) async fn waiting(tx: &mut Tx, co: &ChangeOrder, among: Option<&[Space]>) -> Result<Vec<Uuid>> {
    let view = super::co_state::view_change_order(tx, co.clone()).await?;
    let done: HashSet<Uuid> = view.ResolvedSpaceIDs.into_iter().collect();
    let scope: HashSet<Uuid> = match among {
        Some(spaces) => spaces.iter().map(|s| s.SpaceID).collect(),
        None => co.InScopeSpaceIDs.iter().copied().collect(),
    };
    let order = match co_link_type(co.UpdateType) {
        Some(t) => {
            let all: HashSet<Uuid> = co.InScopeSpaceIDs.iter().copied().collect();
            hop_order(co.SpaceID, &tx.space_edges(t).await?, Some(&all))
        }
        None => co.InScopeSpaceIDs.clone(),
    };
    Ok(order.into_iter().filter(|s| scope.contains(s) && !done.contains(s)).collect())
}

/// The Stages a promotion enters: from the first one not fully reached through the named one
/// (or just the first not reached). Naming a later Stage never skips an earlier one's gates.
pub(crate) async fn stages_to_promote(
    tx: &mut Tx,
    co: &ChangeOrder,
    st: &super::stages::Staged,
    named: Option<&str>,
) -> Result<Vec<usize>> {
    let view = super::co_state::view_change_order(tx, co.clone()).await?;
    let done: HashSet<Uuid> = view.ResolvedSpaceIDs.into_iter().collect();
    let first = st.stages.iter().position(|s| s.is_empty() || s.iter().any(|x| !done.contains(&x.SpaceID)));
    let target = match named {
        Some(n) => st.wf.stage_index(n).ok_or_else(|| {
            let names: Vec<&str> = st.wf.stages().iter().map(|s| s.name()).collect();
            OpError::invalid(
                "TargetStage",
                n,
                format!("no such Stage; the workflow has: {}", names.join(", ")),
            )
        })?,
        None => match first {
            Some(f) => f,
            None => return Ok(vec![]),
        },
    };
    Ok(match first {
        Some(f) if f <= target => (f..=target).collect(),
        _ => vec![],
    })
}

/// Records a promotion forced past failing gates on the ChangeOrder.
async fn record_override(
    store: &Store,
    actor: &Actor,
    co: Uuid,
    stage: &str,
    failing: &[&crate::gates::Verdict],
    reason: &str,
) -> Result<()> {
    let mut tx = store.write().await?;
    let mut order = tx.must_get::<ChangeOrder>(co).await?;
    order.PromotionOverrides.push(crate::model::PromotionOverride {
        Stage: stage.to_string(),
        FailedGates: failing.iter().map(|v| v.to_string()).collect(),
        Reason: reason.to_string(),
        UserID: actor.id(),
        OverriddenAt: Utc::now(),
    });
    tx.update(&mut order).await?;
    tx.commit().await?;
    Ok(())
}

/// Promotes each Space in its own transaction; with several, stops at the first failure and
/// reports it (a single named Space returns its error).
#[allow(clippy::too_many_arguments)]
async fn promote_spaces(
    store: &Store,
    actor: &Actor,
    co: &ChangeOrder,
    targets: Vec<Uuid>,
    req: &PromoteChangeOrder,
    hooks: &PromoteHooks,
    single: bool,
    out: &mut PromoteResult,
) -> Result<()> {
    for target in targets {
        match promote_space(store, actor, co.ChangeOrderID, target, req, hooks).await {
            Ok(p) => out.Spaces.push(p),
            Err(e) if single => return Err(e),
            Err(e) => {
                out.Complete = false;
                let slug = store
                    .read()
                    .await?
                    .get::<Space>(target)
                    .await?
                    .map(|s| s.Slug.to_string())
                    .unwrap_or_default();
                out.Spaces.push(SpacePromotion {
                    Space: slug,
                    SpaceID: target,
                    Plan: Plan { Units: vec![], Digest: String::new() },
                    Applied: false,
                    Error: Some(e.to_string()),
                });
                break;
            }
        }
    }
    Ok(())
}

async fn promote_space(
    store: &Store,
    actor: &Actor,
    co_id: Uuid,
    target: Uuid,
    req: &PromoteChangeOrder,
    hooks: &PromoteHooks,
) -> Result<SpacePromotion> {
    let mut tx = store.write().await?;
    let out = apply_in_space(&mut tx, actor, co_id, target, req, hooks).await?;
    if out.Applied {
        tx.commit().await?;
    }
    Ok(out)
}

/// Plans the ChangeOrder into one Space from a snapshot read inside `tx` and applies the plan
/// there (unless a dry run), passing over Units that carry the end Tag. The caller commits, so
/// a worker can finish its task in the same transaction.
pub(crate) async fn apply_in_space(
    tx: &mut Tx,
    actor: &Actor,
    co_id: Uuid,
    target: Uuid,
    req: &PromoteChangeOrder,
    hooks: &PromoteHooks,
) -> Result<SpacePromotion> {
    let tx = &mut *tx;
    let co = tx.must_get::<ChangeOrder>(co_id).await?;
    refuse_aborted(&co)?;
    let space = tx.must_get::<Space>(target).await?;
    actor.require(
        space.SpaceID,
        space.Slug.as_str(),
        if req.DryRun { Permission::View } else { Permission::Edit },
    )?;
    let (snapshot, upstream_units) = snapshot(tx, &co, &space).await?;
    let plan = match &snapshot {
        Some(s) => plan_promotion(s).map_err(|e| OpError::unprocessable("Unit", "", e.to_string()))?,
        None => invoke_plan(tx, &co, &space).await?,
    };
    if let Some(expected) = req.ExpectedPlan.as_ref().filter(|e| **e != plan.Digest) {
        return Err(OpError::Stale {
            field: "ExpectedPlan".into(),
            value: expected.clone(),
            message: format!(
                "the plan for space '{}' has changed since it was previewed (now {}); nothing was written: preview again",
                space.Slug, plan.Digest
            ),
        });
    }
    if req.DryRun {
        return Ok(SpacePromotion {
            Space: space.Slug.to_string(),
            SpaceID: target,
            Plan: plan,
            Applied: false,
            Error: None,
        });
    }
    let calls = match co.InvocationID {
        Some(id) => {
            let inv = tx.must_get::<Invocation>(id).await?;
            super::bind_invocation(&inv, &co.Parameters)?
        }
        None => vec![],
    };
    let links = match co_link_type(co.UpdateType) {
        Some(t) => links_by_unit(tx, target, t).await?,
        None => HashMap::new(),
    };
    let desc = format!("change order {}", co.Slug);
    for (done, line) in plan.Units.iter().enumerate() {
        let mark = |kind, mark, unit, num| (kind, mark, unit, num);
        let mut marks = vec![];
        match &line.Outcome {
            Outcome::Skip { .. } => continue,
            Outcome::Clone { At, To } => {
                let up = upstream_units.get(&line.UpstreamUnitID.unwrap_or_default()).ok_or_else(|| {
                    OpError::Internal(format!("planned clone of unknown unit {}", line.Unit))
                })?;
                let at = if *At > 0 { *At } else { *To };
                let (unit, link) = clone_unit(tx, actor, &space, up, at).await?;
                if *At > 0 {
                    marks.push(mark(MarkKind::Tag, co.StartTagID, unit.UnitID, unit.HeadRevisionNum));
                    let r = merge_through(tx, actor, unit, link, false, Some(*To)).await?;
                    marks.extend(
                        r.Revisions
                            .iter()
                            .map(|v| mark(MarkKind::ChangeOrder, co_id, v.UnitID, v.RevisionNum)),
                    );
                    marks.push(mark(MarkKind::Tag, co.EndTagID, r.Unit.UnitID, r.Unit.HeadRevisionNum));
                } else {
                    marks.push(mark(MarkKind::ChangeOrder, co_id, unit.UnitID, unit.HeadRevisionNum));
                    marks.push(mark(MarkKind::Tag, co.EndTagID, unit.UnitID, unit.HeadRevisionNum));
                }
            }
            Outcome::Upgrade { To, .. } => {
                let unit = tx.must_get::<Unit>(line.UnitID.unwrap_or_default()).await?;
                let link = links.get(&unit.UnitID).cloned().ok_or_else(|| {
                    OpError::Internal(format!("planned upgrade of unit {} without a link", unit.Slug))
                })?;
                marks.push(mark(MarkKind::Tag, co.StartTagID, unit.UnitID, unit.HeadRevisionNum));
                let r = merge_through(tx, actor, unit, link, false, Some(*To)).await?;
                marks.extend(
                    r.Revisions.iter().map(|v| mark(MarkKind::ChangeOrder, co_id, v.UnitID, v.RevisionNum)),
                );
                marks.push(mark(MarkKind::Tag, co.EndTagID, r.Unit.UnitID, r.Unit.HeadRevisionNum));
            }
            Outcome::Mark { Start } => {
                let unit = tx.must_get::<Unit>(line.UnitID.unwrap_or_default()).await?;
                marks.push(mark(MarkKind::Tag, co.StartTagID, unit.UnitID, *Start));
                marks.push(mark(MarkKind::Tag, co.EndTagID, unit.UnitID, unit.HeadRevisionNum));
            }
            Outcome::Invoke => {
                let unit = tx.must_get::<Unit>(line.UnitID.unwrap_or_default()).await?;
                marks.push(mark(MarkKind::Tag, co.StartTagID, unit.UnitID, unit.HeadRevisionNum));
                let r = super::functions::apply_calls(tx, actor, vec![unit.clone()], &calls, false, &desc)
                    .await?;
                let head = match r.first().and_then(|r| r.RevisionNum) {
                    Some(n) => {
                        marks.push(mark(MarkKind::ChangeOrder, co_id, unit.UnitID, n));
                        n
                    }
                    None => unit.HeadRevisionNum,
                };
                marks.push(mark(MarkKind::Tag, co.EndTagID, unit.UnitID, head));
            }
        }
        for (kind, id, unit, num) in marks {
            tx.mark(kind, id, space.SpaceID, unit, num).await?;
        }
        if hooks.fail_after_units == Some(done + 1) {
            return Err(OpError::Internal(format!(
                "injected failure after {} unit(s) of space {}",
                done + 1,
                space.Slug
            )));
        }
    }
    Ok(SpacePromotion {
        Space: space.Slug.to_string(),
        SpaceID: target,
        Plan: plan,
        Applied: true,
        Error: None,
    })
}

/// The snapshot a Link-following promotion is planned from, and the upstream Units by ID.
/// `None` for an Invoke ChangeOrder.
async fn snapshot(
    tx: &mut Tx,
    co: &ChangeOrder,
    space: &Space,
) -> Result<(Option<Snapshot>, HashMap<Uuid, Unit>)> {
    let Some(t) = co_link_type(co.UpdateType) else { return Ok((None, HashMap::new())) };
    if space.SpaceID == co.SpaceID {
        return Err(OpError::unprocessable(
            "Space",
            space.Slug.as_str(),
            "a change order is not promoted into its own space",
        ));
    }
    let links = links_by_unit(tx, space.SpaceID, t).await?;
    let taken: HashSet<Uuid> = tx
        .marked_in_space(MarkKind::Tag, co.EndTagID, space.SpaceID)
        .await?
        .into_iter()
        .map(|m| m.unit)
        .collect();
    let mut upstream_spaces: Vec<Uuid> = links.values().map(|l| l.ToSpaceID).collect();
    if t == crate::model::UpdateType::UpgradeUnit {
        upstream_spaces.extend(space.UpstreamSpaceID);
    }
    upstream_spaces.sort();
    upstream_spaces.dedup();
    let covered: HashMap<Uuid, (i64, i64)> =
        co.CoveredUnits.iter().map(|c| (c.UnitID, (c.StartRevisionNum, c.EndRevisionNum))).collect();
    let mut upstream = vec![];
    let mut by_id = HashMap::new();
    for p in upstream_spaces {
        let intervals: Option<HashMap<Uuid, (i64, i64)>> = if p == co.SpaceID {
            None
        } else {
            let ends = tx.marked_in_space(MarkKind::Tag, co.EndTagID, p).await?;
            if ends.is_empty() {
                let slug = tx.get::<Space>(p).await?.map(|s| s.Slug.to_string()).unwrap_or_default();
                return Err(OpError::unprocessable(
                    "Space",
                    space.Slug.as_str(),
                    format!(
                        "space '{slug}', which '{}' takes from, has not taken change order '{}' yet: promote it first",
                        space.Slug, co.Slug
                    ),
                ));
            }
            let starts: HashMap<Uuid, i64> = tx
                .marked_in_space(MarkKind::Tag, co.StartTagID, p)
                .await?
                .into_iter()
                .map(|m| (m.unit, m.revision_num))
                .collect();
            let mut iv = HashMap::new();
            for m in ends {
                iv.insert(m.unit, (starts.get(&m.unit).copied().unwrap_or(0), m.revision_num));
            }
            Some(iv)
        };
        for u in tx.list::<Unit>(Some(p)).await? {
            let interval = match &intervals {
                None => covered.get(&u.UnitID).copied(),
                Some(iv) => iv.get(&u.UnitID).copied(),
            };
            upstream.push(UpstreamUnit {
                id: u.UnitID,
                slug: u.Slug.to_string(),
                interval,
                created_after: intervals.is_none() && interval.is_none() && u.CreatedAt > co.CreatedAt,
            });
            by_id.insert(u.UnitID, u);
        }
    }
    let mut cursors: HashMap<Uuid, Vec<i64>> = HashMap::new();
    for l in tx.links_into_space(space.SpaceID).await? {
        if l.UpdateType == t {
            cursors.entry(l.ToUnitID).or_default().push(l.UpstreamLastMergedRevisionNum);
        }
    }
    let downstream = tx
        .list::<Unit>(Some(space.SpaceID))
        .await?
        .into_iter()
        .map(|u| DownstreamUnit {
            id: u.UnitID,
            slug: u.Slug.to_string(),
            head: u.HeadRevisionNum,
            taken: taken.contains(&u.UnitID),
            link: links.get(&u.UnitID).map(|l| (l.ToUnitID, l.UpstreamLastMergedRevisionNum)),
            downstream_cursors: cursors.remove(&u.UnitID).unwrap_or_default(),
        })
        .collect();
    let clones = t == crate::model::UpdateType::UpgradeUnit;
    Ok((Some(Snapshot { upstream, downstream, clones }), by_id))
}

/// The plan of an Invoke ChangeOrder in one Space: the covered Units, asked now.
async fn invoke_plan(tx: &mut Tx, co: &ChangeOrder, space: &Space) -> Result<Plan> {
    debug_assert_eq!(co.UpdateType, ChangeOrderType::Invoke);
    let covered = super::co_state::covered_units(tx, co).await?;
    let taken: HashSet<Uuid> = tx
        .marked_in_space(MarkKind::Tag, co.EndTagID, space.SpaceID)
        .await?
        .into_iter()
        .map(|m| m.unit)
        .collect();
    let mut units: Vec<UnitPlan> = covered
        .get(&space.SpaceID)
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|u| UnitPlan {
            Unit: u.Slug.to_string(),
            UnitID: Some(u.UnitID),
            UpstreamUnitID: None,
            HeadRevisionNum: u.HeadRevisionNum,
            Outcome: if taken.contains(&u.UnitID) {
                Outcome::Skip { Reason: SkipReason::AlreadyTaken }
            } else {
                Outcome::Invoke
            },
        })
        .collect();
    units.sort_by(|a, b| a.Unit.cmp(&b.Unit));
    Ok(Plan { Digest: crate::changeorder::digest(&units), Units: units })
}

/// The body of an undo.
#[allow(non_snake_case)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemoteChangeOrder {
    pub Space: String,
}

/// What an undo did to one Unit.
#[allow(non_snake_case)]
#[derive(Debug, Serialize)]
pub struct RestoredUnit {
    pub Unit: String,
    /// `Restore` (a new revision with the data from before the change), `Unchanged` (the data
    /// already was), `AlreadyRestored`, or `KeptClone` (the change created the Unit).
    pub Outcome: String,
    pub RevisionNum: i64,
}

/// Undoes an aborted ChangeOrder in one Space, in one step: every Unit that took it gets the
/// data it had before, marked with the `-co-restore` Tag (minted on first use).
pub async fn demote_change_order(
    store: &Store,
    actor: &Actor,
    space: &str,
    key: &str,
    req: DemoteChangeOrder,
) -> Result<Vec<RestoredUnit>> {
    let mut tx = store.write().await?;
    let base = resolve::space(&mut tx, space).await?;
    let mut co = resolve::in_space::<ChangeOrder>(&mut tx, &base, key).await?;
    let target = resolve::space(&mut tx, &req.Space).await?;
    actor.require(target.SpaceID, target.Slug.as_str(), Permission::Edit)?;
    if co.AbortedReason.is_empty() {
        return Err(OpError::unprocessable(
            "ChangeOrder",
            co.Slug.as_str(),
            format!(
                "change order '{}' is not aborted: undo requires the abort first (changeflow changeorder update {} --space {} --aborted-reason R)",
                co.Slug, co.Slug, base.Slug
            ),
        ));
    }
    let ends = tx.marked_in_space(MarkKind::Tag, co.EndTagID, target.SpaceID).await?;
    if ends.is_empty() || target.SpaceID == co.SpaceID {
        return Err(OpError::unprocessable(
            "Space",
            target.Slug.as_str(),
            format!("space '{}' has not taken change order '{}': nothing to undo", target.Slug, co.Slug),
        ));
    }
    let restore_tag = match co.RestoreTagID {
        Some(t) => t,
        None => {
            let now = Utc::now();
            let slug = Slug::parse(&format!("{}-co-restore", co.Slug))?;
            let tag = Tag {
                TagID: Uuid::new_v4(),
                SpaceID: co.SpaceID,
                DisplayName: slug.to_string(),
                Slug: slug,
                Labels: Labels::new(),
                Annotations: Labels::new(),
                ChangeOrderID: Some(co.ChangeOrderID),
                Version: 1,
                CreatedAt: now,
                UpdatedAt: now,
            };
            tx.insert(&tag).await?;
            co.RestoreTagID = Some(tag.TagID);
            tx.update(&mut co).await?;
            tag.TagID
        }
    };
    let starts: HashMap<Uuid, i64> = tx
        .marked_in_space(MarkKind::Tag, co.StartTagID, target.SpaceID)
        .await?
        .into_iter()
        .map(|m| (m.unit, m.revision_num))
        .collect();
    let restored: HashSet<Uuid> = tx
        .marked_in_space(MarkKind::Tag, restore_tag, target.SpaceID)
        .await?
        .into_iter()
        .map(|m| m.unit)
        .collect();
    let mut out = vec![];
    let mut seen = HashSet::new();
    for end in ends {
        if !seen.insert(end.unit) {
            continue;
        }
        let mut unit = tx.must_get::<Unit>(end.unit).await?;
        let (outcome, num) = if restored.contains(&unit.UnitID) {
            ("AlreadyRestored", unit.HeadRevisionNum)
        } else if let Some(start) = starts.get(&unit.UnitID) {
            let (_, before) = tx.must_revision(unit.UnitID, *start).await?;
            if data_hash(&before) == unit.DataHash {
                ("Unchanged", unit.HeadRevisionNum)
            } else {
                let desc = format!("undo change order {}", co.Slug);
                let upstream = unit.UpstreamRevisionNum;
                super::units::append_revision(
                    &mut tx,
                    &mut unit,
                    &before,
                    RevisionSource::Restore,
                    actor.id(),
                    &desc,
                    upstream,
                )
                .await?;
                tx.update(&mut unit).await?;
                ("Restore", unit.HeadRevisionNum)
            }
        } else {
            ("KeptClone", unit.HeadRevisionNum)
        };
        if outcome != "AlreadyRestored" {
            tx.mark(MarkKind::Tag, restore_tag, target.SpaceID, unit.UnitID, num).await?;
        }
        out.push(RestoredUnit { Unit: unit.Slug.to_string(), Outcome: outcome.into(), RevisionNum: num });
    }
    tx.commit().await?;
    Ok(out)
}
