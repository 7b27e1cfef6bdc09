//! Releases: publishing a Space's Units to its release Target, reading Releases back, and
//! recording the live status a GitOps operator reports.
//!
//! A publish reads and builds the bundle in one read transaction, delivers it through the
//! Target's provider with no transaction open, then records the Release, its Tag, the marks on
//! the bundled revisions and each Unit's `LastReleasedRevisionNum` in one write transaction. A
//! failed delivery records nothing. `ReleaseNum` counts per Target, across every Space that
//! publishes to it, in the Target's `LastReleaseNum`: of two publishes racing for one number
//! the second fails with 409 on both engines.

use super::spaces::{parse_where, to_json};
use super::{Actor, OpError, Result, resolve};
use crate::model::{
    ChangeOrder, Entity, HealthStatus, Labels, LiveStatus, OperationPhase, Permission, Release, Slug, Space,
    SyncStatus, Tag, Target, Unit,
};
use crate::release::provider::{Provider, TargetProvider};
use crate::release::{Bundle, BundleHeader, RevisionSpec};
use crate::store::{MarkKind, Store, StoreError, Tx};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::HashMap;
use uuid::Uuid;

/// The body of a publish.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishRelease {
    /// Empty or absent: every Unit at its head. See [`crate::release::REVISION_FORMS`].
    #[serde(default)]
    pub Revision: Option<String>,
}

/// What a GitOps operator reports about the Space's latest Release.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveStatusUpdate {
    /// Synced, OutOfSync or Unknown.
    pub Sync: String,
    /// Succeeded, Running, Failed, Error or Unknown.
    pub Operation: String,
    /// Healthy, Progressing, Degraded, Suspended, Missing or Unknown.
    pub Health: String,
    #[serde(default)]
    pub Message: Option<String>,
    /// RFC 3339; default: now.
    #[serde(default)]
    pub ObservedAt: Option<String>,
}

/// Everything a publish decided before delivering.
struct Plan {
    space: Space,
    target: Target,
    provider: TargetProvider,
    bundle: Bundle,
}

/// Publishes the Space's Units at `req.Revision` to the Space's release Target. Needs Edit.
pub async fn publish_release(
    store: &Store,
    actor: &Actor,
    space: &str,
    req: PublishRelease,
) -> Result<Release> {
    let spec_text = req.Revision.unwrap_or_default().trim().to_string();
    let spec = RevisionSpec::parse(&spec_text)?;
    let spec_text = if spec == RevisionSpec::Heads { String::new() } else { spec_text };
    let plan = {
        let mut tx = store.read().await?;
        plan(&mut tx, actor, space, &spec, spec_text).await?
    };
    let b = &plan.bundle;
    if let Err(e) = plan.provider.deliver(b).await {
        return Err(OpError::unprocessable(
            "Target",
            plan.target.Slug.as_str(),
            format!(
                "release {} of space '{}' was not published: delivering it to target '{}' ({}) failed: {e}; nothing was recorded",
                b.ReleaseNum, plan.space.Slug, plan.target.Slug, plan.target.ProviderType
            ),
        ));
    }
    let release = record(store, actor, &plan).await?;
    if let Some(co) = release.ChangeOrderID {
        super::stages::refresh_stage(store, co).await?;
    }
    tracing::info!(space = %plan.space.Slug, target = %plan.target.Slug, num = release.ReleaseNum,
                   digest = %release.Digest, "release published");
    Ok(release)
}

/// Reads the Space, its Target and the revisions the spec picks, and builds the bundle.
async fn plan(
    tx: &mut Tx,
    actor: &Actor,
    space: &str,
    spec: &RevisionSpec,
    spec_text: String,
) -> Result<Plan> {
    let sp = resolve::space(tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Edit)?;
    let target = release_target(tx, &sp).await?;
    let provider = TargetProvider::for_target(&target).map_err(|e| {
        OpError::unprocessable(
            e.field.clone(),
            e.value.clone(),
            format!("release target '{}' of space '{}' cannot deliver: {e}", target.Slug, sp.Slug),
        )
    })?;
    let units = tx.list::<Unit>(Some(sp.SpaceID)).await?;
    let (picks, change_order) = pick_revisions(tx, actor, &sp, spec, &units).await?;
    let mut missing = vec![];
    let mut invalid = vec![];
    let mut entries = vec![];
    for u in &units {
        let Some(&num) = picks.get(&u.UnitID) else {
            missing.push(u.Slug.to_string());
            continue;
        };
        let (rev, data) = tx.must_revision(u.UnitID, num).await?;
        if let Some(first) = rev.ValidationErrors.first() {
            let n = rev.ValidationErrors.len();
            invalid.push((
                u.Slug.to_string(),
                format!("{} (revision {num}: {n} error(s), first: {})", u.Slug, first.Message),
            ));
        }
        entries.push((u.UnitID, u.Slug.to_string(), num, data));
    }
    if !missing.is_empty() {
        return Err(OpError::unprocessable(
            "Unit",
            missing.join(","),
            format!(
                "revision '{spec_text}' does not mark unit(s) {} of space '{}': the change has not reached them",
                missing.join(", "),
                sp.Slug
            ),
        ));
    }
    if !invalid.is_empty() {
        let (slugs, why): (Vec<String>, Vec<String>) = invalid.into_iter().unzip();
        return Err(OpError::unprocessable(
            "Unit",
            slugs.join(","),
            format!("validation errors block publishing space '{}': {}", sp.Slug, why.join("; ")),
        ));
    }
    render_deckhand(&units, &mut entries, &sp)?;
    if let Some(co) = change_order {
        let bundle: std::collections::BTreeMap<Uuid, i64> =
            entries.iter().map(|(u, _, n, _)| (*u, *n)).collect();
        release_gates(tx, co, &sp, bundle).await?;
    }
    let header = BundleHeader {
        space_id: sp.SpaceID,
        space_slug: sp.Slug.to_string(),
        target_id: target.TargetID,
        target_slug: target.Slug.to_string(),
        release_num: target.LastReleaseNum + 1,
        revision_spec: spec_text,
        change_order_id: change_order,
    };
    Ok(Plan { space: sp, provider, bundle: Bundle::build(header, entries), target })
}

/// A Release bundles Deckhand/YAML Units rendered: the Space's Deckhand documents are layered
/// together and each Unit ships the rendered documents that came from it (abstract and replaced
/// documents never ship). A render error refuses the publish, naming the Deckhand error class.
fn render_deckhand(units: &[Unit], entries: &mut [(Uuid, String, i64, String)], sp: &Space) -> Result<()> {
    let deckhand: std::collections::HashSet<Uuid> = units
        .iter()
        .filter(|u| u.ToolchainType == crate::model::ToolchainType::DeckhandYaml)
        .map(|u| u.UnitID)
        .collect();
    if deckhand.is_empty() {
        return Ok(());
    }
    let key = |d: &serde_json::Value| (d["schema"].to_string(), d["metadata"]["name"].to_string());
    let mut owner = HashMap::new();
    let mut docs = vec![];
    for (unit, _, _, data) in entries.iter().filter(|e| deckhand.contains(&e.0)) {
        for d in crate::model::parse_stream(data)? {
            // A replacement and its parent share schema and name: the rendered one is the
            // replacement's.
            if d["metadata"]["replacement"] == true {
                owner.insert(key(&d), *unit);
            } else {
                owner.entry(key(&d)).or_insert(*unit);
            }
            docs.push(d);
        }
    }
    let rendered =
        crate::layering::render(&docs, &crate::layering::RenderOptions::default()).map_err(|e| {
            OpError::unprocessable(
                "Unit",
                e.document().map(|d| d.name.clone()).unwrap_or_default(),
                format!("the Deckhand documents of space '{}' do not render ({}): {e}", sp.Slug, e.class()),
            )
        })?;
    for (unit, _, _, data) in entries.iter_mut().filter(|e| deckhand.contains(&e.0)) {
        let mine: Vec<serde_json::Value> =
            rendered.iter().filter(|d| owner.get(&key(d)) == Some(unit)).cloned().collect();
        *data = crate::model::render_stream(&mine);
    }
    Ok(())
}

/// Refuses a publish for a ChangeOrder whose workflow's ReleasePrerequisites for the Space's
/// Stage do not hold over the revisions the Release would bundle.
async fn release_gates(
    tx: &mut Tx,
    co: Uuid,
    sp: &Space,
    bundle: std::collections::BTreeMap<Uuid, i64>,
) -> Result<()> {
    let co = tx.must_get::<crate::model::ChangeOrder>(co).await?;
    let Some(staged) = super::stages::staged(tx, &co).await? else { return Ok(()) };
    let Some(k) = staged.stage_of(sp.SpaceID) else { return Ok(()) };
    if staged.wf.stages()[k].spec().ReleasePrerequisites.is_empty() {
        return Ok(());
    }
    let view = super::view_change_order(tx, co.clone()).await?;
    let people = super::stages::People::load(tx).await?;
    let facts =
        super::stages::space_facts(tx, &co, &view, sp, &people, Some(bundle), crate::gates::FactNeeds::ALL)
            .await?;
    let co_json = super::spaces::to_json(&view);
    let verdicts = crate::gates::evaluate_release(&staged.wf, k, &facts, &co_json, chrono::Utc::now());
    let failing = crate::gates::failing(&verdicts);
    if failing.is_empty() {
        return Ok(());
    }
    let stage = staged.wf.stages()[k].name().to_string();
    Err(OpError::GatesClosed {
        message: format!(
            "publishing change order '{}' in space '{}' (stage '{stage}') is refused; no Release was made: {}",
            co.Slug,
            sp.Slug,
            failing.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; ")
        ),
        stage,
        gates: serde_json::to_value(&verdicts).expect("verdicts serialize"),
    })
}

/// The Space's release Target, or a 422 saying how to set one.
async fn release_target(tx: &mut Tx, sp: &Space) -> Result<Target> {
    let how = format!("set one with `changeflow space update {} --release-target SPACE/TARGET`", sp.Slug);
    let Some(id) = sp.ReleaseTargetID else {
        return Err(OpError::unprocessable(
            "Space",
            sp.Slug.as_str(),
            format!("space '{}' has no release target, so it cannot publish; {how}", sp.Slug),
        ));
    };
    tx.get::<Target>(id).await?.ok_or_else(|| {
        OpError::unprocessable(
            "ReleaseTargetID",
            id.to_string(),
            format!("the release target of space '{}' ({id}) no longer exists; {how}", sp.Slug),
        )
    })
}

/// Per Unit of the Space, the revision number `spec` picks; and the ChangeOrder it names.
async fn pick_revisions(
    tx: &mut Tx,
    actor: &Actor,
    sp: &Space,
    spec: &RevisionSpec,
    units: &[Unit],
) -> Result<(HashMap<Uuid, i64>, Option<Uuid>)> {
    let (tag, change_order) = match spec {
        RevisionSpec::Heads => {
            return Ok((units.iter().map(|u| (u.UnitID, u.HeadRevisionNum)).collect(), None));
        }
        RevisionSpec::Tag(r) => {
            let (tag_space, tag) = resolve::qualified::<Tag>(tx, r, Some(sp)).await?;
            actor.require(tag_space.SpaceID, tag_space.Slug.as_str(), Permission::View)?;
            (tag.TagID, None)
        }
        RevisionSpec::ChangeOrder(r) | RevisionSpec::BeforeChangeOrder(r) => {
            let (co_space, co) = change_order_for(tx, r, sp).await?;
            actor.require(co_space.SpaceID, co_space.Slug.as_str(), Permission::View)?;
            match spec {
                RevisionSpec::ChangeOrder(_) => (co.EndTagID, Some(co.ChangeOrderID)),
                _ => (co.StartTagID, None),
            }
        }
    };
    let mut picks: HashMap<Uuid, i64> = HashMap::new();
    for m in tx.marked_in_space(MarkKind::Tag, tag, sp.SpaceID).await? {
        let e = picks.entry(m.unit).or_insert(m.revision_num);
        *e = (*e).max(m.revision_num);
    }
    Ok((picks, change_order))
}

/// A ChangeOrder named `space/slug`, by UUID, or by slug in the publishing Space or, failing
/// that, the nearest of its upstream Spaces (a change is usually authored upstream).
async fn change_order_for(tx: &mut Tx, key: &str, sp: &Space) -> Result<(Space, ChangeOrder)> {
    match resolve::qualified::<ChangeOrder>(tx, key, Some(sp)).await {
        Err(OpError::NotFound { .. }) if !key.contains('/') && Uuid::parse_str(key).is_err() => {}
        other => return other,
    }
    let mut next = sp.UpstreamSpaceID;
    for _ in 0..32 {
        let Some(id) = next else { break };
        let Some(up) = tx.get::<Space>(id).await? else { break };
        if let Some(co) = tx.find::<ChangeOrder>(Some(up.SpaceID), key).await? {
            return Ok((up, co));
        }
        next = up.UpstreamSpaceID;
    }
    Err(OpError::NotFound {
        kind: "ChangeOrder",
        key: format!("{}/{key} (or in its upstream spaces)", sp.Slug),
    })
}

/// The Release's Slug: `release-<n>`, or `<target>-release-<n>` when the Space already holds
/// that name (it published to another Target before).
async fn release_slug(tx: &mut Tx, space: Uuid, target: &Target, n: i64) -> Result<Slug> {
    let plain = format!("release-{n}");
    let taken = tx.find::<Release>(Some(space), &plain).await?.is_some()
        || tx.find::<Tag>(Some(space), &plain).await?.is_some();
    let s = if taken { format!("{}-release-{n}", target.Slug) } else { plain };
    Ok(Slug::parse(&s)?)
}

/// Records the delivered Release in one write transaction.
async fn record(store: &Store, actor: &Actor, plan: &Plan) -> Result<Release> {
    let b = &plan.bundle;
    let raced = |what: String| OpError::Conflict {
        field: "ReleaseNum".into(),
        value: b.ReleaseNum.to_string(),
        message: format!(
            "release {} of space '{}' was delivered but not recorded: {what}; publish again",
            b.ReleaseNum, plan.space.Slug
        ),
    };
    let mut tx = store.write().await?;
    let space = tx.must_get::<Space>(plan.space.SpaceID).await?;
    if space.ReleaseTargetID != Some(plan.target.TargetID) {
        return Err(raced(format!("the release target of space '{}' changed meanwhile", space.Slug)));
    }
    // Taking the number first serializes publishes to one Target: of two racing for it, the
    // second sees it taken, or (PostgreSQL, both read it before either wrote) a stale Version.
    let mut target = tx.must_get::<Target>(plan.target.TargetID).await?;
    let taken = || raced(format!("another release to target '{}' took that number", plan.target.Slug));
    if target.LastReleaseNum + 1 != b.ReleaseNum {
        return Err(taken());
    }
    target.LastReleaseNum = b.ReleaseNum;
    match tx.update(&mut target).await {
        Err(StoreError::VersionConflict { .. }) => return Err(taken()),
        other => other?,
    }
    let now = Utc::now();
    let slug = release_slug(&mut tx, space.SpaceID, &target, b.ReleaseNum).await?;
    let display = format!("Release {} of {} to {}", b.ReleaseNum, space.Slug, target.Slug);
    let tag = Tag {
        TagID: Uuid::new_v4(),
        SpaceID: space.SpaceID,
        Slug: slug.clone(),
        DisplayName: display.clone(),
        Labels: Labels::new(),
        Annotations: Labels::new(),
        ChangeOrderID: None,
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    tx.insert(&tag).await?;
    let release = Release {
        ReleaseID: Uuid::new_v4(),
        SpaceID: space.SpaceID,
        Slug: slug,
        DisplayName: display,
        Labels: Labels::new(),
        Annotations: Labels::new(),
        TargetID: target.TargetID,
        ReleaseNum: b.ReleaseNum,
        TagID: tag.TagID,
        Revisions: b.revisions(),
        RevisionSpec: b.RevisionSpec.clone(),
        ChangeOrderID: b.ChangeOrderID,
        Digest: b.Digest.clone(),
        PublishedBy: actor.id(),
        LiveStatus: None,
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    tx.insert(&release).await?;
    for r in &release.Revisions {
        let Some(mut unit) = tx.get::<Unit>(r.UnitID).await? else {
            return Err(raced(format!("unit '{}' was deleted meanwhile", r.UnitSlug)));
        };
        tx.mark(MarkKind::Tag, tag.TagID, space.SpaceID, r.UnitID, r.RevisionNum).await?;
        tx.mark(MarkKind::Release, release.ReleaseID, space.SpaceID, r.UnitID, r.RevisionNum).await?;
        unit.LastReleasedRevisionNum = r.RevisionNum;
        tx.update(&mut unit).await?;
    }
    tx.commit().await?;
    Ok(release)
}

/// A Space's Releases, newest first.
pub(crate) async fn releases_in(tx: &mut Tx, space: Uuid) -> Result<Vec<Release>> {
    let mut all = tx.list::<Release>(Some(space)).await?;
    all.sort_by(|a, b| b.CreatedAt.cmp(&a.CreatedAt).then(b.ReleaseNum.cmp(&a.ReleaseNum)));
    Ok(all)
}

/// The Space's most recent Release, if it has published.
pub(crate) async fn latest_release(tx: &mut Tx, space: Uuid) -> Result<Option<Release>> {
    Ok(releases_in(tx, space).await?.into_iter().next())
}

/// Lists a Space's Releases matching `where_`, newest first. Needs View.
pub async fn list_releases(
    store: &Store,
    actor: &Actor,
    space: &str,
    where_: Option<&str>,
) -> Result<Vec<Release>> {
    let filter = parse_where(Release::KIND, where_)?;
    let mut tx = store.read().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::View)?;
    let all = releases_in(&mut tx, sp.SpaceID).await?;
    Ok(all.into_iter().filter(|r| filter.as_ref().is_none_or(|f| f.matches(&to_json(r)))).collect())
}

/// One Release of a Space by ReleaseNum, Slug, UUID, or `latest`. Needs View. A number names
/// the Release to the current release Target when the Space has published to several.
pub async fn get_release(store: &Store, actor: &Actor, space: &str, key: &str) -> Result<Release> {
    let mut tx = store.read().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::View)?;
    let not_found = || OpError::NotFound { kind: Release::KIND, key: format!("{}/{key}", sp.Slug) };
    if key == "latest" {
        return latest_release(&mut tx, sp.SpaceID).await?.ok_or_else(not_found);
    }
    if let Ok(n) = key.parse::<i64>() {
        let mut matching: Vec<Release> =
            releases_in(&mut tx, sp.SpaceID).await?.into_iter().filter(|r| r.ReleaseNum == n).collect();
        matching.sort_by_key(|r| Some(r.TargetID) != sp.ReleaseTargetID);
        return matching.into_iter().next().ok_or_else(not_found);
    }
    resolve::in_space::<Release>(&mut tx, &sp, key).await
}

/// Records what the GitOps operator reports on the Space's latest Release. Needs Edit.
pub async fn set_live_status(
    store: &Store,
    actor: &Actor,
    space: &str,
    req: LiveStatusUpdate,
) -> Result<Release> {
    let observed: DateTime<Utc> = match req.ObservedAt.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => Utc::now(),
        Some(s) => DateTime::parse_from_rfc3339(s)
            .map_err(|e| OpError::invalid("ObservedAt", s, format!("expected an RFC 3339 time: {e}")))?
            .with_timezone(&Utc),
    };
    let status = LiveStatus {
        Sync: req.Sync.parse::<SyncStatus>()?,
        Operation: req.Operation.parse::<OperationPhase>()?,
        Health: req.Health.parse::<HealthStatus>()?,
        Message: req.Message.unwrap_or_default(),
        ObservedAt: observed,
    };
    if status.Message.len() > 1024 {
        return Err(OpError::invalid("Message", "", "must be at most 1024 bytes"));
    }
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Edit)?;
    let Some(mut release) = latest_release(&mut tx, sp.SpaceID).await? else {
        return Err(OpError::unprocessable(
            "Space",
            sp.Slug.as_str(),
            format!("space '{}' has no Release yet; live status is recorded on the latest Release", sp.Slug),
        ));
    };
    release.LiveStatus = Some(status);
    tx.update(&mut release).await?;
    tx.commit().await?;
    // Healthy may complete a rollout: every ChangeOrder this Space has released moves on.
    let mut tx = store.read().await?;
    let mut orders: Vec<Uuid> =
        releases_in(&mut tx, sp.SpaceID).await?.iter().filter_map(|r| r.ChangeOrderID).collect();
    drop(tx);
    orders.sort();
    orders.dedup();
    for co in orders {
        super::stages::refresh_stage(store, co).await?;
    }
    Ok(release)
}
