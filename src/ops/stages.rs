//! ChangeOrders under a ChangeWorkflow: which Spaces each Stage holds, the facts the gates read
//! (gathered fresh from the store for every evaluation, never cached), and the Stage reached.

use super::releases::{latest_release, releases_in};
use super::spaces::to_json;
use super::{OpError, Result};
use crate::gates::{
    self, AttestationFact, CompiledWorkflow, LiveFacts, RevisionFacts, SpaceFacts, UnitValidationError,
    Verdict,
};
use crate::model::{Attestation, ChangeOrder, ChangeOrderView, Permission, Revision, Space, User};
use crate::store::{MarkKind, Store, Tx};
use chrono::Utc;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use uuid::Uuid;

/// A ChangeOrder's frozen workflow, compiled, with each Stage's Spaces.
pub(crate) struct Staged {
    pub wf: Arc<CompiledWorkflow>,
    pub stages: Vec<Vec<Space>>,
}

impl Staged {
    /// The Stage holding `space`, if any.
    pub fn stage_of(&self, space: Uuid) -> Option<usize> {
        self.stages.iter().position(|s| s.iter().any(|x| x.SpaceID == space))
    }
}

/// Compiled workflows by ChangeOrder. The definition is frozen onto the ChangeOrder when it is
/// created, so its compiled form (CEL programs included) never goes stale; Stage membership and
/// every fact a gate reads are still read fresh each time.
fn compiled(co: &ChangeOrder, def: &serde_json::Value) -> Result<Arc<CompiledWorkflow>> {
    static CACHE: OnceLock<Mutex<HashMap<Uuid, Arc<CompiledWorkflow>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(wf) = cache.lock().expect("workflow cache").get(&co.ChangeOrderID) {
        return Ok(wf.clone());
    }
    let wf = Arc::new(gates::compile(gates::from_json(def.clone())?)?);
    let mut m = cache.lock().expect("workflow cache");
    if m.len() > 1024 {
        m.clear();
    }
    m.insert(co.ChangeOrderID, wf.clone());
    Ok(wf)
}

/// Compiles the ChangeOrder's frozen workflow (none: `None`) and works out Stage membership:
/// the Stage's selector AND the base Space's component AND the ChangeOrder's scope.
pub(crate) async fn staged(tx: &mut Tx, co: &ChangeOrder) -> Result<Option<Staged>> {
    staged_only(tx, co, None).await
}

/// As [`staged`], computing the membership of Stage `only` alone (the others stay empty) when
/// given: what a gate evaluation needs.
pub(crate) async fn staged_only(
    tx: &mut Tx,
    co: &ChangeOrder,
    only: Option<usize>,
) -> Result<Option<Staged>> {
    let Some(def) = &co.ChangeWorkflow else { return Ok(None) };
    let wf = compiled(co, def)?;
    let base = tx.must_get::<Space>(co.SpaceID).await?;
    let component = component_of(&base)?;
    let scope: HashSet<Uuid> = co.InScopeSpaceIDs.iter().copied().collect();
    let mut stages: Vec<Vec<Space>> = vec![vec![]; wf.stages().len()];
    for s in tx.list::<Space>(None).await? {
        if s.SpaceID == base.SpaceID
            || s.Labels.get("Component") != Some(&component)
            || !(scope.is_empty() || scope.contains(&s.SpaceID))
        {
            continue;
        }
        let json = to_json(&s);
        for (k, st) in wf.stages().iter().enumerate() {
            if only.is_none_or(|o| o == k) && st.where_space().matches(&json) {
                stages[k].push(s.clone());
            }
        }
    }
    Ok(Some(Staged { wf, stages }))
}

/// The component a Space belongs to (its `Component` label).
pub(crate) fn component_of(base: &Space) -> Result<String> {
    base.Labels.get("Component").cloned().ok_or_else(|| {
        OpError::unprocessable(
            "Labels.Component",
            base.Slug.as_str(),
            format!(
                "space '{}' has no Component label, so a workflow's Stages cannot select its component's Spaces",
                base.Slug
            ),
        )
    })
}

/// Who may be named in messages, and who holds Approve where.
pub(crate) struct People(HashMap<Uuid, User>);

impl People {
    pub async fn load(tx: &mut Tx) -> Result<People> {
        Ok(People(tx.list::<User>(None).await?.into_iter().map(|u| (u.UserID, u)).collect()))
    }
}

/// The revisions a Tag marks in a Space, the highest per Unit: (Unit, revision).
async fn tag_heads_in(tx: &mut Tx, tag: Uuid, space: Uuid) -> Result<BTreeMap<Uuid, i64>> {
    let mut out = BTreeMap::new();
    for m in tx.marked_in_space(MarkKind::Tag, tag, space).await? {
        let e = out.entry(m.unit).or_insert(m.revision_num);
        *e = (*e).max(m.revision_num);
    }
    Ok(out)
}

/// Attestation facts for revisions of one Space: for each (Unit, revision), the authors of the
/// change there and every Attestation covering it or an earlier revision with the same content.
async fn revision_facts(
    tx: &mut Tx,
    co: &ChangeOrder,
    space: &Space,
    revisions: &BTreeMap<Uuid, i64>,
    people: &People,
) -> Result<(Vec<RevisionFacts>, Vec<UnitValidationError>)> {
    let starts = tag_heads_in(tx, co.StartTagID, space.SpaceID).await?;
    let attestations = tx.list::<Attestation>(Some(space.SpaceID)).await?;
    let revoked: HashSet<Uuid> = attestations.iter().filter_map(|a| a.RevokedAttestationID).collect();
    let mut facts = vec![];
    let mut invalid = vec![];
    for (unit, num) in revisions {
        let history: Vec<Revision> = tx.revisions(*unit).await?;
        let Some(rev) = history.iter().find(|r| r.RevisionNum == *num) else { continue };
        let slug = tx.get::<crate::model::Unit>(*unit).await?.map(|u| u.Slug.to_string()).unwrap_or_default();
        for e in &rev.ValidationErrors {
            invalid.push(UnitValidationError { UnitSlug: slug.clone(), Message: e.Message.clone() });
        }
        let start = starts.get(unit).copied().unwrap_or(0);
        let authors: BTreeSet<Uuid> = history
            .iter()
            .filter(|r| r.RevisionNum > start && r.RevisionNum <= *num && !r.UserID.is_nil())
            .map(|r| r.UserID)
            .collect();
        let covering = attestations.iter().filter(|a| {
            a.RevokedAttestationID.is_none()
                && a.Revisions
                    .iter()
                    .any(|c| c.UnitID == *unit && c.DataHash == rev.DataHash && c.RevisionNum <= *num)
        });
        let attestations = covering
            .map(|a| {
                let user = people.0.get(&a.UserID);
                AttestationFact {
                    AttestationID: a.AttestationID,
                    UserID: a.UserID,
                    UserName: user.map(|u| u.Slug.to_string()).unwrap_or_default(),
                    Type: a.Type.clone(),
                    Result: a.Result,
                    CreatedAt: a.CreatedAt,
                    ExpiresAt: a.ExpiresAt,
                    Revoked: revoked.contains(&a.AttestationID),
                    AttesterCanApprove: user
                        .and_then(|u| u.permission_on(space.SpaceID))
                        .is_some_and(|p| p >= Permission::Approve),
                }
            })
            .collect();
        facts.push(RevisionFacts {
            UnitSlug: slug,
            RevisionNum: *num,
            Authors: authors,
            Attestations: attestations,
        });
    }
    Ok((facts, invalid))
}

/// Everything the gates read about one Space, from current state. `bundle` replaces the
/// end-Tag revisions with the ones a Release would bundle (release gates).
pub(crate) async fn space_facts(
    tx: &mut Tx,
    co: &ChangeOrder,
    view: &ChangeOrderView,
    space: &Space,
    people: &People,
    bundle: Option<BTreeMap<Uuid, i64>>,
    needs: gates::FactNeeds,
) -> Result<SpaceFacts> {
    let (revision_facts, invalid) = if needs.revisions {
        let revisions = match bundle {
            Some(b) => b,
            None => tag_heads_in(tx, co.EndTagID, space.SpaceID).await?,
        };
        revision_facts(tx, co, space, &revisions, people).await?
    } else {
        (vec![], vec![])
    };
    let releases = if needs.releases { releases_in(tx, space.SpaceID).await? } else { vec![] };
    let earliest = releases.iter().rev().find(|r| r.ChangeOrderID == Some(co.ChangeOrderID));
    let latest = if needs.releases { latest_release(tx, space.SpaceID).await? } else { None };
    let live = latest.and_then(|r| r.LiveStatus).map(|l| {
        let word = |v: serde_json::Value| v.as_str().unwrap_or_default().to_string();
        LiveFacts {
            Sync: word(to_json(&l.Sync)),
            Operation: word(to_json(&l.Operation)),
            Health: word(to_json(&l.Health)),
        }
    });
    Ok(SpaceFacts {
        SpaceID: space.SpaceID,
        Slug: space.Slug.to_string(),
        Space: to_json(space),
        Promoted: view.ResolvedSpaceIDs.contains(&space.SpaceID),
        ValidationErrors: invalid,
        HasReleaseTarget: space.ReleaseTargetID.is_some(),
        Released: view.ReleasedSpaceIDs.contains(&space.SpaceID),
        Release: earliest.map(to_json),
        LiveStatus: live,
        Revisions: revision_facts,
    })
}

/// The entry gates of Stage `k` over the Spaces of Stage `k - 1`, from current state.
pub(crate) async fn entry_verdicts(
    tx: &mut Tx,
    co: &ChangeOrder,
    staged: &Staged,
    k: usize,
) -> Result<Vec<Verdict>> {
    if k == 0 {
        return Ok(vec![]);
    }
    let view = super::view_change_order(tx, co.clone()).await?;
    let needs = staged.wf.entry_needs(k);
    let people = if needs.revisions { People::load(tx).await? } else { People(HashMap::new()) };
    let mut facts = vec![];
    for s in &staged.stages[k - 1] {
        facts.push(space_facts(tx, co, &view, s, &people, None, needs).await?);
    }
    Ok(gates::evaluate_entry(&staged.wf, k, &facts, &to_json(&view), Utc::now()))
}

/// Records the Stage a ChangeOrder has reached: the last Stage every one of whose Spaces (and of
/// every Stage before) has taken it, or `Completed` once the last Stage satisfies Final.
pub(crate) async fn refresh_stage(store: &Store, co_id: Uuid) -> Result<()> {
    let mut tx = store.write().await?;
    let Some(mut co) = tx.get::<ChangeOrder>(co_id).await? else { return Ok(()) };
    let Some(staged) = staged(&mut tx, &co).await? else { return Ok(()) };
    let view = super::view_change_order(&mut tx, co.clone()).await?;
    let resolved: HashSet<Uuid> = view.ResolvedSpaceIDs.iter().copied().collect();
    let reached = staged
        .stages
        .iter()
        .take_while(|spaces| !spaces.is_empty() && spaces.iter().all(|s| resolved.contains(&s.SpaceID)))
        .count();
    let mut stage = match reached {
        0 => String::new(),
        n => staged.wf.stages()[n - 1].name().to_string(),
    };
    if reached == staged.stages.len() {
        let people = People::load(&mut tx).await?;
        let mut facts = vec![];
        for s in staged.stages.last().into_iter().flatten() {
            facts.push(space_facts(&mut tx, &co, &view, s, &people, None, gates::FactNeeds::ALL).await?);
        }
        let verdicts = gates::evaluate_final(&staged.wf, &facts, &to_json(&view), Utc::now());
        if gates::failing(&verdicts).is_empty() {
            stage = gates::COMPLETED.to_string();
        }
    }
    if co.Stage != stage {
        co.Stage = stage;
        tx.update(&mut co).await?;
        tx.commit().await?;
    }
    Ok(())
}
