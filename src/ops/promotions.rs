//! Promotions through the queue, as store work: the request (a Promotion and its first wave's
//! tasks in one transaction), the wave driver, a worker's claim / block / apply / retry of one
//! task, cancel, and the reconciler's scan. `jobs` owns the queue and calls these; each returns
//! the jobs to enqueue *after* its transaction committed (store first, queue second).

use super::promote::{
    PromoteChangeOrder, PromoteHooks, SpacePromotion, apply_in_space, refuse_aborted, scoped_target,
    stage_of_target,
};
use super::stages::{Staged, entry_verdicts, staged};
use super::{Actor, OpError, Result, resolve};
use crate::gates::{self, Verdict};
use crate::model::{
    ChangeOrder, FailureBudget, Permission, Promotion, PromotionOverride, PromotionStage, PromotionState,
    PromotionTask, Slug, Space, TaskState, User,
};
use crate::store::{Store, StoreError, Tx};
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use uuid::Uuid;

/// The body of a promotion request.
#[allow(non_snake_case)]
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromotionRequest {
    /// One Space only; absent: every waiting Space of each Stage up to `TargetStage`.
    #[serde(default)]
    pub Space: Option<String>,
    /// Under a workflow: go through every Stage up to this one (default: the next unreached).
    #[serde(default)]
    pub TargetStage: Option<String>,
    /// Past failing entry gates (Manage on the base Space, and a Reason).
    #[serde(default)]
    pub Force: bool,
    #[serde(default)]
    pub Reason: Option<String>,
    /// Tasks queued or running at once across all workers (0: no cap).
    #[serde(default)]
    pub MaxInFlight: u32,
    /// Spaces started per second by each worker process (0: no cap).
    #[serde(default)]
    pub Rate: f64,
    #[serde(default)]
    pub FailureBudget: FailureBudget,
    /// How long blocked tasks keep waiting for gates, e.g. `24h` (default: 7 days).
    #[serde(default)]
    pub Deadline: Option<String>,
    /// A second request with this key while the first is Running returns the first.
    #[serde(default)]
    pub IdempotencyKey: Option<String>,
}

/// A Promotion with a count of its tasks per state, per wave, and (on request) the tasks.
#[allow(non_snake_case)]
#[derive(Debug, Serialize)]
pub struct PromotionView {
    #[serde(flatten)]
    pub Promotion: Promotion,
    pub Counts: BTreeMap<String, usize>,
    pub Waves: Vec<WaveView>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub Tasks: Vec<PromotionTask>,
}

/// One wave: its Stage, its size and how many tasks are in each state.
#[allow(non_snake_case)]
#[derive(Debug, Serialize)]
pub struct WaveView {
    pub Wave: i64,
    pub Stage: String,
    pub Total: usize,
    pub Counts: BTreeMap<String, usize>,
}

/// A job to put on the queue once the transaction that made it due has committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRef {
    pub task: Uuid,
    pub key: String,
}

/// The idempotency key of a task's job for one generation.
pub fn job_key(task: Uuid, generation: u32) -> String {
    format!("{task}:{generation}")
}

/// The generation a job key (or one of its retry keys) was made for.
pub fn job_generation(key: &str) -> Option<u32> {
    let rest = key.split_once(':')?.1;
    rest.split('#').next()?.parse().ok()
}

const DEFAULT_DEADLINE: TimeDelta = TimeDelta::days(7);

fn check_request(req: &PromotionRequest) -> Result<Option<TimeDelta>> {
    if req.Force && req.Reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(OpError::invalid(
            "Reason",
            "",
            "--force needs --reason: a forced promotion is recorded with why",
        ));
    }
    if !(req.Rate.is_finite() && req.Rate >= 0.0) {
        return Err(OpError::invalid("Rate", req.Rate.to_string(), "a rate is Spaces per second, 0 or more"));
    }
    if let Some(p) = req.FailureBudget.MaxFailedPercent
        && !(0.0..=100.0).contains(&p)
    {
        return Err(OpError::invalid(
            "FailureBudget.MaxFailedPercent",
            p.to_string(),
            "a share of a wave's Spaces, between 0 and 100",
        ));
    }
    req.Deadline
        .as_deref()
        .map(|d| gates::parse_duration(d).map_err(|e| OpError::invalid("Deadline", d, e)))
        .transpose()
}

/// Writes a Promotion and its first wave's tasks in one transaction, and returns the jobs to
/// queue. Refuses (writing nothing) an aborted ChangeOrder, an unknown Stage, a Space out of
/// scope, and `Force` without Manage or a Reason. Closed gates do not refuse: the tasks wait.
pub async fn request_promotion(
    store: &Store,
    actor: &Actor,
    space: &str,
    co_key: &str,
    req: PromotionRequest,
    source: &str,
    slug: Option<Slug>,
) -> Result<(Promotion, Vec<JobRef>)> {
    let deadline = check_request(&req)?;
    let mut tx = store.write().await?;
    let base = resolve::space(&mut tx, space).await?;
    actor.require(base.SpaceID, base.Slug.as_str(), Permission::Edit)?;
    if req.Force {
        actor.require(base.SpaceID, base.Slug.as_str(), Permission::Manage)?;
    }
    let co = resolve::in_space::<ChangeOrder>(&mut tx, &base, co_key).await?;
    refuse_aborted(&co)?;
    if let Some(key) = req.IdempotencyKey.as_deref().filter(|k| !k.is_empty()) {
        let running = tx.list::<Promotion>(Some(base.SpaceID)).await?.into_iter().find(|p| {
            p.IdempotencyKey == key
                && p.ChangeOrderID == co.ChangeOrderID
                && p.State == PromotionState::Running
        });
        if let Some(p) = running {
            return Ok((p, vec![]));
        }
    }
    let st = staged(&mut tx, &co).await?;
    let target = scoped_target(&mut tx, &co, req.Space.as_deref()).await?;
    let stages = match (&st, &target, &req.TargetStage) {
        (None, _, Some(named)) => {
            return Err(OpError::invalid(
                "TargetStage",
                named.as_str(),
                format!("change order '{}' has no ChangeWorkflow, so it has no Stages", co.Slug),
            ));
        }
        (None, _, None) => vec![PromotionStage { Name: String::new(), Index: None }],
        (Some(st), Some(t), _) => vec![stage_at(st, stage_of_target(st, &co, t)?)],
        (Some(st), None, named) => super::promote::stages_to_promote(&mut tx, &co, st, named.as_deref())
            .await?
            .into_iter()
            .map(|k| stage_at(st, k))
            .collect(),
    };
    let now = Utc::now();
    let id = Uuid::new_v4();
    let slug = match slug {
        Some(s) => s,
        None => Slug::parse(&format!("p-{}", ulid::Ulid::generate().to_string().to_lowercase()))?,
    };
    let mut p = Promotion {
        PromotionID: id,
        SpaceID: base.SpaceID,
        Slug: slug,
        ChangeOrderID: co.ChangeOrderID,
        ChangeOrder: co.Slug.to_string(),
        Source: source.to_string(),
        IdempotencyKey: req.IdempotencyKey.clone().unwrap_or_default(),
        TargetSpaceID: target.as_ref().map(|t| t.SpaceID),
        TargetStage: req.TargetStage.clone().unwrap_or_default(),
        Stages: stages,
        StagePos: 0,
        Wave: 0,
        RequestedBy: actor.id(),
        Force: req.Force,
        Reason: req.Reason.clone().unwrap_or_default(),
        MaxInFlight: req.MaxInFlight,
        Rate: req.Rate,
        FailureBudget: req.FailureBudget.clone(),
        Deadline: Some(now + deadline.unwrap_or(DEFAULT_DEADLINE)),
        State: PromotionState::Running,
        StateReason: String::new(),
        FinishedAt: None,
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    tx.insert(&p).await?;
    let jobs = step(&mut tx, &mut p).await?;
    tx.commit().await?;
    Ok((p, jobs))
}

fn stage_at(st: &Staged, k: usize) -> PromotionStage {
    PromotionStage { Name: st.wf.stages()[k].name().to_string(), Index: Some(k) }
}

fn finish(p: &mut Promotion, state: PromotionState, reason: impl Into<String>) {
    p.State = state;
    p.StateReason = reason.into();
    p.FinishedAt = Some(Utc::now());
}

/// Cancels every task of `p` that has not reached an end and is not held by a worker.
async fn cancel_open_tasks(tx: &mut Tx, p: &Promotion, reason: &str) -> Result<()> {
    for mut t in tx.tasks(p.PromotionID).await? {
        if matches!(t.State, TaskState::Queued | TaskState::Blocked) {
            t.State = TaskState::Cancelled;
            t.Reason = reason.to_string();
            t.FinishedAt = Some(Utc::now());
            tx.update_task(&mut t).await?;
        }
    }
    Ok(())
}

/// The wave driver, inside a transaction: ends the Promotion when its ChangeOrder is aborted or
/// a wave spent its failure budget; queues the current wave's Pending tasks up to MaxInFlight;
/// when a wave is over, creates the next one (next hop depth, then next Stage). Writes `p`.
async fn step(tx: &mut Tx, p: &mut Promotion) -> Result<Vec<JobRef>> {
    let mut jobs = vec![];
    if p.State.is_terminal() {
        return Ok(jobs);
    }
    let co = match tx.get::<ChangeOrder>(p.ChangeOrderID).await? {
        Some(co) if co.AbortedReason.is_empty() => co,
        found => {
            let reason = match found {
                Some(co) => format!("change order '{}' was aborted: {}", co.Slug, co.AbortedReason),
                None => format!("change order '{}' was deleted", p.ChangeOrder),
            };
            finish(p, PromotionState::Cancelled, reason.clone());
            cancel_open_tasks(tx, p, &reason).await?;
            tx.update(p).await?;
            return Ok(jobs);
        }
    };
    let before = p.clone();
    let now = Utc::now();
    loop {
        if p.Wave > 0 {
            let counts = tx.task_counts(p.PromotionID, p.Wave).await?;
            let n = |s: TaskState| counts.get(&s).copied().unwrap_or(0);
            let total: usize = counts.values().sum();
            let failed = n(TaskState::Failed);
            let stage = wave_name(p);
            if p.FailureBudget.exceeded(failed, total) {
                finish(
                    p,
                    PromotionState::Halted,
                    format!(
                        "wave {} ({stage}) halted: {failed} of {total} Spaces failed, over the failure budget; the {} not started are left untouched",
                        p.Wave,
                        n(TaskState::Pending)
                    ),
                );
                break;
            }
            let pending = n(TaskState::Pending);
            let in_flight: usize = counts.iter().filter(|(s, _)| s.in_flight()).map(|(_, n)| n).sum();
            if pending + in_flight > 0 {
                let room = if p.MaxInFlight == 0 {
                    pending
                } else {
                    (p.MaxInFlight as usize).saturating_sub(in_flight)
                };
                if room > 0 && pending > 0 {
                    for mut t in tx.tasks_in_state(p.PromotionID, p.Wave, TaskState::Pending, room).await? {
                        t.State = TaskState::Queued;
                        t.Generation += 1;
                        t.DueAt = Some(now);
                        tx.update_task(&mut t).await?;
                        jobs.push(JobRef { task: t.TaskID, key: job_key(t.TaskID, t.Generation) });
                    }
                }
                break;
            }
            if failed > 0 {
                finish(
                    p,
                    PromotionState::Halted,
                    format!(
                        "wave {} ({stage}) ended with {failed} of {total} Spaces failed; nothing after it starts",
                        p.Wave
                    ),
                );
                break;
            }
        }
        match next_wave(tx, p, &co).await? {
            None => {
                finish(p, PromotionState::Completed, "");
                break;
            }
            Some((pos, spaces)) => {
                let first_of_stage = p.Wave == 0 || pos != p.StagePos;
                p.StagePos = pos;
                p.Wave += 1;
                if first_of_stage && p.Force {
                    record_forced_gates(tx, p, &co).await?;
                }
                let stage = p.Stages[pos].Name.clone();
                for s in spaces {
                    tx.insert_task(&PromotionTask {
                        TaskID: Uuid::new_v4(),
                        PromotionID: p.PromotionID,
                        SpaceID: s.SpaceID,
                        Space: s.Slug.to_string(),
                        Stage: stage.clone(),
                        Wave: p.Wave,
                        State: TaskState::Pending,
                        Attempts: 0,
                        Generation: 0,
                        Worker: String::new(),
                        LeaseUntil: None,
                        DueAt: Some(now),
                        Reason: String::new(),
                        FailingGates: vec![],
                        UnitsChanged: 0,
                        UnitsSkipped: 0,
                        StartedAt: None,
                        FinishedAt: None,
                        Version: 1,
                        CreatedAt: now,
                        UpdatedAt: now,
                    })
                    .await?;
                }
            }
        }
    }
    // Most runs only queue the next task: no need to write (and contend on) the Promotion.
    if *p != before {
        tx.update(p).await?;
    }
    Ok(jobs)
}

fn wave_name(p: &Promotion) -> String {
    match p.Stages.get(p.StagePos).map(|s| s.Name.as_str()) {
        Some("") | None => "no stage".into(),
        Some(n) => format!("stage {n}"),
    }
}

/// The next wave: from the current Stage on, the Spaces still waiting that have no task in this
/// Promotion yet, keeping only those whose in-scope upstream Spaces already took the change.
async fn next_wave(tx: &mut Tx, p: &Promotion, co: &ChangeOrder) -> Result<Option<(usize, Vec<Space>)>> {
    let st = staged(tx, co).await?;
    let view = super::view_change_order(tx, co.clone()).await?;
    let resolved: HashSet<Uuid> = view.ResolvedSpaceIDs.iter().copied().collect();
    let tasked: HashSet<Uuid> = tx.tasks(p.PromotionID).await?.into_iter().map(|t| t.SpaceID).collect();
    let scope: HashSet<Uuid> = co.InScopeSpaceIDs.iter().copied().collect();
    let mut parents: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
    if let Some(t) = super::changeorders::co_link_type(co.UpdateType) {
        for (down, up) in tx.space_edges(t).await? {
            if up != co.SpaceID && scope.contains(&up) {
                parents.entry(down).or_default().push(up);
            }
        }
    }
    let all_spaces: HashMap<Uuid, Space> = if st.is_none() {
        tx.list::<Space>(None).await?.into_iter().map(|s| (s.SpaceID, s)).collect()
    } else {
        HashMap::new()
    };
    for pos in p.StagePos..p.Stages.len() {
        let candidates: Vec<Space> = match (p.TargetSpaceID, &st, p.Stages[pos].Index) {
            (Some(t), _, _) => match &st {
                Some(st) => st.stages.iter().flatten().filter(|s| s.SpaceID == t).take(1).cloned().collect(),
                None => all_spaces.get(&t).cloned().into_iter().collect(),
            },
            (None, Some(st), Some(k)) => st.stages[k].clone(),
            _ => co.InScopeSpaceIDs.iter().filter_map(|id| all_spaces.get(id).cloned()).collect(),
        };
        let waiting: Vec<Space> = candidates
            .into_iter()
            .filter(|s| s.SpaceID != co.SpaceID && !tasked.contains(&s.SpaceID))
            .filter(|s| p.TargetSpaceID.is_some() || !resolved.contains(&s.SpaceID))
            .collect();
        if waiting.is_empty() {
            continue;
        }
        let ready: Vec<Space> = waiting
            .iter()
            .filter(|s| parents.get(&s.SpaceID).is_none_or(|ups| ups.iter().all(|u| resolved.contains(u))))
            .cloned()
            .collect();
        // Nothing ready means an upstream is outside this Promotion's reach: run them anyway so
        // each task fails naming the Space it waits for.
        return Ok(Some((pos, if ready.is_empty() { waiting } else { ready })));
    }
    Ok(None)
}

/// A forced Promotion entering a Stage whose gates fail records why on the ChangeOrder.
async fn record_forced_gates(tx: &mut Tx, p: &Promotion, co: &ChangeOrder) -> Result<()> {
    let Some(k) = p.Stages[p.StagePos].Index else { return Ok(()) };
    let Some(st) = staged(tx, co).await? else { return Ok(()) };
    let verdicts = entry_verdicts(tx, co, &st, k).await?;
    let failing = gates::failing(&verdicts);
    if failing.is_empty() {
        return Ok(());
    }
    let mut order = tx.must_get::<ChangeOrder>(co.ChangeOrderID).await?;
    order.PromotionOverrides.push(PromotionOverride {
        Stage: p.Stages[p.StagePos].Name.clone(),
        FailedGates: failing.iter().map(|v| v.to_string()).collect(),
        Reason: p.Reason.clone(),
        UserID: p.RequestedBy,
        OverriddenAt: Utc::now(),
    });
    tx.update(&mut order).await?;
    Ok(())
}

/// Runs the wave driver for one Promotion in its own transaction (retrying a lost race with
/// another driver), then refreshes the ChangeOrder's Stage when the Promotion ended.
pub async fn pump(store: &Store, promotion: Uuid) -> Result<Vec<JobRef>> {
    Ok(drive(store, promotion).await?.0)
}

/// [`pump`], also giving the Promotion when this run ended it.
pub async fn drive(store: &Store, promotion: Uuid) -> Result<(Vec<JobRef>, Option<Promotion>)> {
    for attempt in 0.. {
        let mut tx = store.write().await?;
        let Some(mut p) = tx.get::<Promotion>(promotion).await? else { return Ok((vec![], None)) };
        if p.State.is_terminal() {
            return Ok((vec![], None));
        }
        match step(&mut tx, &mut p).await {
            Ok(jobs) => {
                tx.commit().await?;
                if p.State.is_terminal() || !jobs.is_empty() {
                    super::stages::refresh_stage(store, p.ChangeOrderID).await.ok();
                }
                return Ok((jobs, p.State.is_terminal().then_some(p)));
            }
            Err(OpError::Conflict { .. }) if attempt < 8 => {
                drop(tx);
                tokio::time::sleep(std::time::Duration::from_millis(5 << attempt)).await;
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("the loop returns")
}

/// A task a worker now holds.
pub struct Claimed {
    pub task: PromotionTask,
    pub promotion: Promotion,
    pub co: ChangeOrder,
    pub actor: Actor,
    pub space: Space,
}

/// What claiming a delivered job found.
pub enum Claim {
    /// Nothing to do: the task ended, the job is stale, or another worker holds it.
    Skip(&'static str),
    /// The task ended here without running (Promotion over, ChangeOrder aborted, deadline
    /// passed); the driver may have more to queue.
    Ended(Vec<JobRef>),
    Run(Box<Claimed>),
}

/// Takes a task for `worker` (state Running, a lease, one more attempt) unless it has ended,
/// the job is of an older generation, or a live lease belongs to someone else.
pub async fn claim(
    store: &Store,
    task: Uuid,
    generation: Option<u32>,
    worker: &str,
    lease: TimeDelta,
) -> Result<Claim> {
    let mut tx = store.write().await?;
    let Some(mut t) = tx.get_task(task).await? else { return Ok(Claim::Skip("task deleted")) };
    if t.State.is_terminal() {
        return Ok(Claim::Skip("task already ended"));
    }
    if generation.is_some_and(|g| g < t.Generation) {
        return Ok(Claim::Skip("stale job: the task was re-queued since"));
    }
    let now = Utc::now();
    if t.State == TaskState::Running && t.Worker != worker && t.LeaseUntil.is_some_and(|l| l > now) {
        return Ok(Claim::Skip("another worker holds the task"));
    }
    if t.State == TaskState::Pending {
        return Ok(Claim::Skip("task is not queued"));
    }
    let p = tx.must_get::<Promotion>(t.PromotionID).await?;
    let co = tx.get::<ChangeOrder>(p.ChangeOrderID).await?;
    let end = |reason: String| (TaskState::Cancelled, reason);
    let ended = if p.State.is_terminal() {
        Some(end(format!("promotion {:?}: {}", p.State, p.StateReason)))
    } else {
        match &co {
            None => Some(end(format!("change order '{}' was deleted", p.ChangeOrder))),
            Some(co) if !co.AbortedReason.is_empty() => {
                Some(end(format!("change order '{}' was aborted: {}", co.Slug, co.AbortedReason)))
            }
            _ if t.State == TaskState::Blocked && p.Deadline.is_some_and(|d| d <= now) => {
                Some((TaskState::Failed, format!("deadline passed while waiting: {}", t.Reason)))
            }
            _ => None,
        }
    };
    if let Some((state, reason)) = ended {
        t.State = state;
        t.Reason = reason;
        t.FinishedAt = Some(now);
        t.Worker.clear();
        tx.update_task(&mut t).await?;
        tx.commit().await?;
        return Ok(Claim::Ended(pump(store, p.PromotionID).await?));
    }
    let co = co.expect("checked above");
    let user = tx.must_get::<User>(p.RequestedBy).await?;
    let space = tx.must_get::<Space>(t.SpaceID).await?;
    t.State = TaskState::Running;
    t.Worker = worker.to_string();
    t.LeaseUntil = Some(now + lease);
    t.Attempts += 1;
    t.StartedAt.get_or_insert(now);
    tx.update_task(&mut t).await?;
    tx.commit().await?;
    Ok(Claim::Run(Box::new(Claimed { task: t, promotion: p, co, actor: Actor { user }, space })))
}

/// Which entry gates a claimed task must pass: its Stage's index, unless the Promotion is
/// forced, the Stage is the first, or there is no workflow.
pub fn gated_stage(c: &Claimed) -> Option<usize> {
    let k = c.promotion.Stages.iter().find(|s| s.Name == c.task.Stage).and_then(|s| s.Index)?;
    (!c.promotion.Force && k > 0).then_some(k)
}

/// The failing entry gates of Stage `k`, evaluated now from current state (Stage membership,
/// the ChangeOrder's derived sets, releases, live status, attestations).
pub async fn failing_gates(store: &Store, co: &ChangeOrder, k: usize) -> Result<Vec<Verdict>> {
    let mut tx = store.read().await?;
    let Some(st) = super::stages::staged_only(&mut tx, co, Some(k - 1)).await? else {
        return Ok(vec![]);
    };
    let verdicts = entry_verdicts(&mut tx, co, &st, k).await?;
    Ok(verdicts.into_iter().filter(|v| !v.Satisfied).collect())
}

/// Hands the task back: `Blocked` (gates), or `Queued` for a retry after a transient error,
/// due at `retry_at`; or `Failed`. Only if this worker still holds it.
pub async fn release(
    store: &Store,
    c: &Claimed,
    state: TaskState,
    reason: String,
    failing: Vec<String>,
    retry_at: DateTime<Utc>,
) -> Result<Vec<JobRef>> {
    let mut tx = store.write().await?;
    let Some(mut t) = tx.get_task(c.task.TaskID).await? else { return Ok(vec![]) };
    if t.Version != c.task.Version || t.Worker != c.task.Worker {
        return Ok(vec![]);
    }
    t.State = state;
    t.Reason = reason;
    t.FailingGates = failing;
    t.Worker.clear();
    t.LeaseUntil = None;
    t.DueAt = Some(retry_at);
    if state.is_terminal() {
        t.FinishedAt = Some(Utc::now());
    }
    tx.update_task(&mut t).await?;
    tx.commit().await?;
    if state.is_terminal() { pump(store, c.promotion.PromotionID).await } else { Ok(vec![]) }
}

/// Plans and applies the Space in one transaction that also marks the task Done, so a crash
/// leaves either both or neither. Then runs the wave driver.
pub async fn apply(store: &Store, c: &Claimed, hooks: &PromoteHooks) -> Result<SpacePromotion> {
    let mut tx = store.write().await?;
    let Some(mut t) = tx.get_task(c.task.TaskID).await? else {
        return Err(OpError::NotFound { kind: "PromotionTask", key: c.task.TaskID.to_string() });
    };
    if t.Version != c.task.Version || t.Worker != c.task.Worker {
        return Err(OpError::Conflict {
            field: "Worker".into(),
            value: c.task.Worker.clone(),
            message: "the task was reclaimed from this worker".into(),
        });
    }
    let req = PromoteChangeOrder::default();
    let sp = apply_in_space(&mut tx, &c.actor, c.co.ChangeOrderID, c.space.SpaceID, &req, hooks).await?;
    t.State = TaskState::Done;
    t.Reason.clear();
    t.FailingGates.clear();
    t.Worker.clear();
    t.LeaseUntil = None;
    t.FinishedAt = Some(Utc::now());
    t.UnitsChanged = sp.Plan.changed() as u32;
    t.UnitsSkipped = sp.Plan.Units.len() as u32 - t.UnitsChanged;
    tx.update_task(&mut t).await?;
    tx.commit().await?;
    Ok(sp)
}

/// Whether an error is worth retrying (a race, a busy or lost database) or permanent.
pub fn is_transient(e: &OpError) -> bool {
    matches!(e, OpError::Conflict { .. } | OpError::Internal(_))
}

/// Renews a lease while a worker still holds the task.
pub async fn renew_lease(store: &Store, task: Uuid, worker: &str, lease: TimeDelta) -> Result<bool> {
    let mut tx = store.write().await?;
    let ok = tx.renew_lease(task, worker, Utc::now() + lease).await?;
    tx.commit().await?;
    Ok(ok)
}

/// The reconciler's pass over tasks: Running ones whose lease ran out go back to Queued, and
/// Queued or Blocked ones overdue by `grace` get a new generation; each gets a fresh job.
pub async fn reconcile_tasks(store: &Store, grace: TimeDelta) -> Result<Vec<JobRef>> {
    let now = Utc::now();
    let overdue = store.read().await?.overdue_tasks(now - grace, now, 1000).await?;
    let mut jobs = vec![];
    for t in overdue {
        let mut tx = store.write().await?;
        let Some(mut t) = tx.get_task(t.TaskID).await? else { continue };
        let expired = t.State == TaskState::Running && t.LeaseUntil.is_none_or(|l| l < now);
        let lost = matches!(t.State, TaskState::Queued | TaskState::Blocked)
            && t.DueAt.is_none_or(|d| d < now - grace);
        if !expired && !lost {
            continue;
        }
        if expired {
            t.Reason = format!("reclaimed from worker '{}', whose lease ran out", t.Worker);
            t.State = TaskState::Queued;
        }
        t.Worker.clear();
        t.LeaseUntil = None;
        t.Generation += 1;
        t.DueAt = Some(now);
        match tx.update_task(&mut t).await {
            Ok(()) => {}
            Err(StoreError::VersionConflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
        tx.commit().await?;
        jobs.push(JobRef { task: t.TaskID, key: job_key(t.TaskID, t.Generation) });
    }
    Ok(jobs)
}

/// Promotions still Running, for the reconciler to drive.
pub async fn running_promotions(store: &Store) -> Result<Vec<Uuid>> {
    let mut tx = store.read().await?;
    Ok(tx
        .list::<Promotion>(None)
        .await?
        .into_iter()
        .filter(|p| p.State == PromotionState::Running)
        .map(|p| p.PromotionID)
        .collect())
}

async fn find_promotion(tx: &mut Tx, key: &str) -> Result<Promotion> {
    if let Ok(id) = key.parse::<Uuid>()
        && let Some(p) = tx.get::<Promotion>(id).await?
    {
        return Ok(p);
    }
    if let Some((space, slug)) = key.split_once('/') {
        let s = resolve::space(tx, space).await?;
        if let Some(p) = tx.find::<Promotion>(Some(s.SpaceID), slug).await? {
            return Ok(p);
        }
    }
    Err(OpError::NotFound { kind: "Promotion", key: key.to_string() })
}

async fn view(tx: &mut Tx, p: Promotion, with_tasks: bool) -> Result<PromotionView> {
    let mut counts = BTreeMap::new();
    let mut waves: Vec<WaveView> = vec![];
    for (wave, stage, state, n) in tx.wave_counts(p.PromotionID).await? {
        *counts.entry(state.to_string()).or_insert(0) += n;
        if waves.last().is_none_or(|w| w.Wave != wave) {
            waves.push(WaveView { Wave: wave, Stage: stage, Total: 0, Counts: BTreeMap::new() });
        }
        let w = waves.last_mut().expect("pushed above");
        w.Total += n;
        w.Counts.insert(state.to_string(), n);
    }
    let tasks = if with_tasks { tx.tasks(p.PromotionID).await? } else { vec![] };
    Ok(PromotionView { Promotion: p, Counts: counts, Waves: waves, Tasks: tasks })
}

/// A Promotion by ID or `space/slug`, with its waves and (unless `with_tasks` is false) tasks.
pub async fn get_promotion(
    store: &Store,
    actor: &Actor,
    key: &str,
    with_tasks: bool,
) -> Result<PromotionView> {
    let mut tx = store.read().await?;
    let p = find_promotion(&mut tx, key).await?;
    let space = tx.must_get::<Space>(p.SpaceID).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::View)?;
    view(&mut tx, p, with_tasks).await
}

/// Promotions in the Spaces the caller may see (or one Space), newest first; optionally those
/// of one ChangeOrder only.
pub async fn list_promotions(
    store: &Store,
    actor: &Actor,
    space: Option<&str>,
    change_order: Option<&str>,
) -> Result<Vec<PromotionView>> {
    let mut tx = store.read().await?;
    let container = resolve::list_scope(&mut tx, actor, space).await?;
    let mut all: Vec<Promotion> =
        tx.list::<Promotion>(container).await?.into_iter().filter(|p| actor.can_view(p.SpaceID)).collect();
    if let Some(co) = change_order {
        all.retain(|p| p.ChangeOrder == co || p.ChangeOrderID.to_string() == co);
    }
    all.sort_by_key(|p| std::cmp::Reverse(p.CreatedAt));
    let mut out = vec![];
    for p in all {
        out.push(view(&mut tx, p, false).await?);
    }
    Ok(out)
}

/// Cancels a running Promotion: queued and blocked tasks end as Cancelled; a task a worker is
/// applying right now finishes (its Space transaction is all or nothing).
pub async fn cancel_promotion(
    store: &Store,
    actor: &Actor,
    key: &str,
    reason: Option<String>,
) -> Result<PromotionView> {
    let mut tx = store.write().await?;
    let mut p = find_promotion(&mut tx, key).await?;
    let space = tx.must_get::<Space>(p.SpaceID).await?;
    actor.require(space.SpaceID, space.Slug.as_str(), Permission::Edit)?;
    if p.State.is_terminal() {
        return Err(OpError::unprocessable(
            "State",
            format!("{:?}", p.State),
            format!("promotion '{}' has already ended ({:?})", p.Slug, p.State),
        ));
    }
    let why =
        format!("cancelled by {}{}", actor.user.Slug, reason.map(|r| format!(": {r}")).unwrap_or_default());
    finish(&mut p, PromotionState::Cancelled, why.clone());
    for mut t in tx.tasks(p.PromotionID).await? {
        if matches!(t.State, TaskState::Queued | TaskState::Blocked | TaskState::Pending) {
            t.State = TaskState::Cancelled;
            t.Reason = why.clone();
            t.FinishedAt = Some(Utc::now());
            tx.update_task(&mut t).await?;
        }
    }
    tx.update(&mut p).await?;
    tx.commit().await?;
    let mut tx = store.read().await?;
    view(&mut tx, p, true).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_keys_carry_the_generation_through_retries() {
        let id = Uuid::new_v4();
        assert_eq!(job_generation(&job_key(id, 3)), Some(3));
        assert_eq!(job_generation(&format!("{}#retry4", job_key(id, 7))), Some(7));
        assert_eq!(job_generation("garbage"), None);
    }

    #[test]
    fn a_request_is_checked_before_anything_is_written() {
        let bad_rate = PromotionRequest { Rate: -1.0, ..Default::default() };
        assert!(check_request(&bad_rate).unwrap_err().to_string().contains("Rate"));
        let bad_pct = PromotionRequest {
            FailureBudget: FailureBudget { MaxFailed: None, MaxFailedPercent: Some(150.0) },
            ..Default::default()
        };
        assert!(check_request(&bad_pct).unwrap_err().to_string().contains("MaxFailedPercent"));
        let force = PromotionRequest { Force: true, ..Default::default() };
        assert!(check_request(&force).unwrap_err().to_string().contains("--reason"));
        let deadline = PromotionRequest { Deadline: Some("soon".into()), ..Default::default() };
        assert!(check_request(&deadline).unwrap_err().to_string().contains("Deadline"));
        let ok = PromotionRequest { Deadline: Some("2h".into()), ..Default::default() };
        assert_eq!(check_request(&ok).unwrap(), Some(TimeDelta::hours(2)));
    }
}
