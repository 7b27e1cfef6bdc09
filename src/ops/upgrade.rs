//! Merging an upstream's new revisions into a downstream Unit through its Link: the pure plan
//! (which revisions to write, what to withhold) and its application in a transaction.

use super::units::append_revision;
use super::{Actor, OpError, Result, resolve};
use crate::merge;
use crate::model::{
    Conflict, Link, Permission, ProtectedPath, Revision, RevisionSource, Space, Unit, UpdateType,
    parse_stream, render_stream,
};
use crate::store::{Store, Tx};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One upstream revision to carry downstream.
#[derive(Debug, Clone)]
pub struct UpstreamStep {
    pub num: i64,
    pub description: String,
    pub docs: Vec<Value>,
}

/// A downstream revision an upgrade will write.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRevision {
    pub docs: Vec<Value>,
    pub description: String,
    pub upstream_num: i64,
}

/// What an upgrade of one Unit will do.
#[derive(Debug, Clone, PartialEq)]
pub struct UpgradePlan {
    pub revisions: Vec<PlannedRevision>,
    /// Every change withheld from the downstream, latest per resource and path.
    pub conflicts: Vec<Conflict>,
}

/// Plans merging `steps` (the upstream revisions after the cursor, in order) into `downstream`.
/// `base` is the upstream's data at the cursor. Each upstream revision becomes one downstream
/// revision if it changes anything there; with `squash`, the whole range becomes one.
pub fn plan_upgrade(
    base: &[Value],
    steps: &[UpstreamStep],
    downstream: &[Value],
    protected: &[ProtectedPath],
    squash: bool,
) -> UpgradePlan {
    let protected: Vec<merge::ProtectedPath> =
        protected.iter().filter_map(|p| merge::ProtectedPath::parse(&p.Resource, &p.Path).ok()).collect();
    let squashed;
    let steps: &[UpstreamStep] = match (squash, steps.last()) {
        (true, Some(last)) if steps.len() > 1 => {
            squashed = [UpstreamStep {
                num: last.num,
                description: format!(
                    "upstream revisions {}..{} squashed: {}",
                    steps[0].num,
                    last.num,
                    steps.iter().map(|s| s.description.as_str()).collect::<Vec<_>>().join("; ")
                ),
                docs: last.docs.clone(),
            }];
            &squashed
        }
        _ => steps,
    };
    let mut prev = base.to_vec();
    let mut current = downstream.to_vec();
    let mut revisions = vec![];
    let mut conflicts: Vec<Conflict> = vec![];
    for step in steps {
        let patch = merge::diff(&prev, &step.docs);
        let applied = merge::apply(&current, &patch, &protected);
        for c in applied.conflicts {
            let c = Conflict {
                Resource: c.resource,
                Path: c.path,
                Reason: c.reason,
                UpstreamValue: c.upstream_value,
                DownstreamValue: c.downstream_value,
                UpstreamRevisionNum: step.num,
            };
            conflicts.retain(|o| !(o.Resource == c.Resource && o.Path == c.Path));
            conflicts.push(c);
        }
        if applied.changed {
            revisions.push(PlannedRevision {
                docs: applied.documents.clone(),
                description: step.description.clone(),
                upstream_num: step.num,
            });
        }
        current = applied.documents;
        prev = step.docs.clone();
    }
    UpgradePlan { revisions, conflicts }
}

/// The body of an upgrade request.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpgradeRequest {
    /// One downstream revision for the whole range.
    #[serde(default)]
    pub Squash: bool,
    /// Merge up to this upstream revision instead of the upstream's head.
    #[serde(default)]
    pub ToRevisionNum: Option<i64>,
    /// Merge through this Link (a MergeUnits link) instead of the Unit's UpgradeUnit link.
    #[serde(default)]
    pub Link: Option<String>,
}

/// What an upgrade did to one Unit.
#[allow(non_snake_case)]
#[derive(Debug, Clone, Serialize)]
pub struct UpgradeResult {
    pub Unit: Unit,
    pub Revisions: Vec<Revision>,
    pub Conflicts: Vec<Conflict>,
    /// The upstream revision now merged (the link's cursor).
    pub UpstreamLastMergedRevisionNum: i64,
}

/// Upgrades one Unit through its UpgradeUnit link (or the named link). Needs Edit.
pub async fn upgrade_unit(
    store: &Store,
    actor: &Actor,
    space: &str,
    unit: &str,
    req: UpgradeRequest,
) -> Result<UpgradeResult> {
    let mut tx = store.write().await?;
    let space = resolve::space(&mut tx, space).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::Edit)?;
    let u = resolve::in_space::<Unit>(&mut tx, &space, unit).await?;
    let link = match &req.Link {
        Some(l) => {
            let link = resolve::in_space::<Link>(&mut tx, &space, l).await?;
            if link.FromUnitID != u.UnitID {
                return Err(OpError::invalid(
                    "Link",
                    l.as_str(),
                    format!("link '{l}' does not start at unit '{}'", u.Slug),
                ));
            }
            link
        }
        None => upgrade_link(&mut tx, &space, &u).await?.ok_or_else(|| {
            OpError::unprocessable(
                "Unit",
                u.Slug.as_str(),
                format!("unit '{}' has no upstream to upgrade from", u.Slug),
            )
        })?,
    };
    let result = merge_through(&mut tx, actor, u, link, req.Squash, req.ToRevisionNum).await?;
    tx.commit().await?;
    Ok(result)
}

/// The UpgradeUnit link that starts at `unit`, if any.
pub(crate) async fn upgrade_link(tx: &mut Tx, space: &Space, unit: &Unit) -> Result<Option<Link>> {
    Ok(tx
        .list::<Link>(Some(space.SpaceID))
        .await?
        .into_iter()
        .find(|l| l.FromUnitID == unit.UnitID && l.UpdateType == UpdateType::UpgradeUnit))
}

/// Merges the link's upstream range (cursor, end] into `unit` inside `tx`, moving the cursors.
pub(crate) async fn merge_through(
    tx: &mut Tx,
    actor: &Actor,
    mut unit: Unit,
    mut link: Link,
    squash: bool,
    end: Option<i64>,
) -> Result<UpgradeResult> {
    let upstream = tx.must_get::<Unit>(link.ToUnitID).await?;
    let cursor = link.UpstreamLastMergedRevisionNum;
    let end = end.unwrap_or(upstream.HeadRevisionNum);
    if end > upstream.HeadRevisionNum || end < cursor {
        return Err(OpError::invalid(
            "ToRevisionNum",
            end.to_string(),
            format!("must be between the cursor {cursor} and the upstream head {}", upstream.HeadRevisionNum),
        ));
    }
    if end == cursor {
        return Ok(UpgradeResult {
            Unit: unit,
            Revisions: vec![],
            Conflicts: vec![],
            UpstreamLastMergedRevisionNum: cursor,
        });
    }
    let base = match cursor {
        0 => vec![],
        n => parse_stream(&tx.must_revision(upstream.UnitID, n).await?.1)?,
    };
    let mut steps = vec![];
    for n in cursor + 1..=end {
        let (rev, data) = tx.must_revision(upstream.UnitID, n).await?;
        steps.push(UpstreamStep { num: n, description: rev.Description, docs: parse_stream(&data)? });
    }
    let downstream = parse_stream(&tx.must_revision(unit.UnitID, unit.HeadRevisionNum).await?.1)?;
    let plan = plan_upgrade(&base, &steps, &downstream, &unit.ProtectedPaths, squash);
    let source = match link.UpdateType {
        UpdateType::UpgradeUnit => RevisionSource::UpgradeUnit,
        UpdateType::MergeUnits => RevisionSource::MergeUnits,
    };
    let mut written = vec![];
    for p in &plan.revisions {
        let data = render_stream(&p.docs);
        written.push(
            append_revision(tx, &mut unit, &data, source, actor.id(), &p.description, p.upstream_num).await?,
        );
    }
    unit.Conflicts = plan.conflicts.clone();
    if link.UpdateType == UpdateType::UpgradeUnit {
        unit.UpstreamRevisionNum = end;
    }
    link.UpstreamLastMergedRevisionNum = end;
    link.DownstreamLastMergedRevisionNum = unit.HeadRevisionNum;
    tx.update(&mut unit).await?;
    tx.update(&mut link).await?;
    Ok(UpgradeResult {
        Unit: unit,
        Revisions: written,
        Conflicts: plan.conflicts,
        UpstreamLastMergedRevisionNum: end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "web", "image": image}]}}}})
    }

    fn step(num: i64, docs: Vec<Value>) -> UpstreamStep {
        UpstreamStep { num, description: format!("rev {num}"), docs }
    }

    #[test]
    fn one_revision_per_effective_upstream_revision() {
        let base = vec![deploy(2, "a:1")];
        let steps = vec![step(2, vec![deploy(2, "a:2")]), step(3, vec![deploy(3, "a:2")])];
        let plan = plan_upgrade(&base, &steps, &base, &[], false);
        assert_eq!(plan.revisions.len(), 2);
        assert_eq!(plan.revisions[0].upstream_num, 2);
        assert_eq!(plan.revisions[1].docs, vec![deploy(3, "a:2")]);
        assert!(plan.conflicts.is_empty());
        let squashed = plan_upgrade(&base, &steps, &base, &[], true);
        assert_eq!(squashed.revisions.len(), 1);
        assert_eq!(squashed.revisions[0].docs, vec![deploy(3, "a:2")]);
    }

    #[test]
    fn protected_paths_are_withheld_as_conflicts() {
        let base = vec![deploy(2, "a:1")];
        let downstream = vec![deploy(5, "a:1")];
        let protected =
            vec![ProtectedPath { Resource: "apps/v1/Deployment//web".into(), Path: "spec.replicas".into() }];
        let steps = vec![step(2, vec![deploy(3, "a:2")])];
        let plan = plan_upgrade(&base, &steps, &downstream, &protected, false);
        assert_eq!(plan.revisions.len(), 1);
        assert_eq!(plan.revisions[0].docs, vec![deploy(5, "a:2")]);
        assert_eq!(plan.conflicts.len(), 1);
        assert_eq!(plan.conflicts[0].Path, "spec.replicas");
        assert_eq!(plan.conflicts[0].UpstreamRevisionNum, 2);
    }

    #[test]
    fn a_revision_with_no_downstream_effect_writes_nothing() {
        let base = vec![deploy(2, "a:1")];
        let downstream = vec![deploy(5, "a:1")];
        let protected =
            vec![ProtectedPath { Resource: "apps/v1/Deployment//web".into(), Path: "spec.replicas".into() }];
        let plan = plan_upgrade(&base, &[step(2, vec![deploy(3, "a:1")])], &downstream, &protected, false);
        assert!(plan.revisions.is_empty());
        assert_eq!(plan.conflicts.len(), 1);
    }
}
