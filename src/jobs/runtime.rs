//! The job runtime one process runs: workers that carry out promotion tasks, the reconciler
//! that repairs what the queue lost, and the scheduler. Every decision about a task is store
//! work in `ops::promotions`; this module moves jobs, waits and measures.

use super::limits::Limits;
use super::queue::{ConsumerOptions, Delivery, Outcome, Queue, Shutdown, handler};
use crate::model::TaskState;
use crate::ops::promotions::{self as promo, Claim, JobRef};
use crate::ops::{OpError, PromoteHooks};
use crate::store::Store;
use crate::telemetry;
use chrono::{TimeDelta, Utc};
use rand::Rng;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tracing::Instrument;

const ANALYZE_EVERY: Duration = Duration::from_secs(60);

/// How workers, the reconciler and the limits behave. Live-safe settings (see ARCHITECTURE §6).
#[derive(Debug, Clone)]
pub struct JobSettings {
    /// Handlers running at once in this process.
    pub concurrency: usize,
    /// How long a claimed task is a worker's without a renewal.
    pub lease: Duration,
    /// How often the reconciler runs.
    pub reconcile_every: Duration,
    /// A Queued or Blocked task this far past due, with the queue empty, is re-queued (ten
    /// times this while the queue still holds jobs).
    pub requeue_grace: Duration,
    /// Blocked and transient retries: base × 2^(attempt-1), capped, with jitter.
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// A task failing transiently this many times is Failed.
    pub max_attempts: u32,
    /// Spaces started per second by this process (0: no cap), and per release Target.
    pub global_rate: f64,
    pub per_target_rate: f64,
    /// How often idle workers poll, and the queue heartbeat.
    pub poll_interval: Duration,
    pub heartbeat: Duration,
    /// How often the scheduler looks for due Schedules.
    pub schedule_every: Duration,
}

impl Default for JobSettings {
    fn default() -> Self {
        JobSettings {
            concurrency: 8,
            lease: Duration::from_secs(30),
            reconcile_every: Duration::from_secs(5),
            requeue_grace: Duration::from_secs(30),
            backoff_base: Duration::from_secs(2),
            backoff_cap: Duration::from_secs(300),
            max_attempts: 10,
            global_rate: 0.0,
            per_target_rate: 0.0,
            poll_interval: Duration::from_millis(100),
            heartbeat: Duration::from_secs(10),
            schedule_every: Duration::from_secs(1),
        }
    }
}

/// Capped exponential backoff with jitter (between half and all of the step), whole seconds
/// as the queues schedule, at least one.
pub fn backoff(base: Duration, cap: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    let step = exp.min(cap).as_secs_f64();
    let jittered = rand::rng().random_range(step / 2.0..=step.max(0.5));
    Duration::from_secs(jittered.round().max(1.0) as u64)
}

/// The handle the server and the `worker` command share.
#[derive(Clone)]
pub struct Jobs {
    pub store: Store,
    pub queue: Arc<dyn Queue>,
    pub settings: Arc<JobSettings>,
    limits: Arc<Limits>,
    gates: Arc<super::gates::GateFlights>,
    hooks: Arc<PromoteHooks>,
    /// This process's worker identity (leases are held under it).
    worker: Arc<str>,
}

impl Jobs {
    pub fn new(store: Store, queue: Arc<dyn Queue>, settings: JobSettings) -> Jobs {
        let worker = format!(
            "{}-{}-{}",
            hostname(),
            std::process::id(),
            &ulid::Ulid::generate().to_string().to_lowercase()[20..]
        );
        Jobs {
            limits: Arc::new(Limits::new(settings.global_rate, settings.per_target_rate)),
            gates: Arc::new(Default::default()),
            store,
            queue,
            settings: Arc::new(settings),
            hooks: Arc::new(PromoteHooks::default()),
            worker: worker.into(),
        }
    }

    /// Puts jobs on the queue. A failure is logged, not returned: the tasks are in the store and
    /// the reconciler queues them again.
    pub async fn enqueue(&self, jobs: Vec<JobRef>) {
        for j in jobs {
            if let Err(e) = self.queue.enqueue(j.task, &j.key).await {
                tracing::warn!(task = %j.task, error = %e, "enqueue failed; the reconciler will retry");
            }
        }
    }

    /// Runs workers until `shutdown`; jobs in hand are finished first.
    pub fn spawn_workers(&self, shutdown: Shutdown) -> JoinHandle<()> {
        let me = self.clone();
        let opts = ConsumerOptions {
            name: "changeflow".into(),
            poll_interval: self.settings.poll_interval,
            heartbeat: self.settings.heartbeat,
            // Retries are decided per task (gates, deadline, transient attempts), not by the queue.
            max_attempts: u32::MAX,
            concurrency: self.settings.concurrency,
            // Fetch no more than can run: a job fetched and waiting in memory is not visible as
            // queued, so the reconciler would take it for lost.
            batch_size: self.settings.concurrency,
            ..ConsumerOptions::default()
        };
        let h = handler(move |d: Delivery| {
            let me = me.clone();
            async move { me.handle(d).await }
        });
        let queue = self.queue.clone();
        tokio::spawn(async move {
            if let Err(e) = queue.consume(opts, h, shutdown).await {
                tracing::error!(error = %e, "worker stopped");
            }
        })
    }

    /// Runs the reconciler until `shutdown`.
    pub fn spawn_reconciler(&self, shutdown: Shutdown) -> JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(me.settings.reconcile_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut analyzed = Instant::now();
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.clone().wait() => return,
                }
                if let Err(e) = me.reconcile().await {
                    tracing::warn!(error = %e, "reconcile pass failed");
                }
                if analyzed.elapsed() >= ANALYZE_EVERY {
                    analyzed = Instant::now();
                    me.analyze_soon();
                }
            }
        })
    }

    /// Runs the scheduler until `shutdown`: due Schedules become Promotions (one per tick,
    /// however many processes run it).
    pub fn spawn_scheduler(&self, shutdown: Shutdown) -> JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(me.settings.schedule_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.clone().wait() => return,
                }
                match crate::ops::schedules::fire_due(&me.store, Utc::now()).await {
                    Ok(jobs) => me.enqueue(jobs).await,
                    Err(e) => tracing::warn!(error = %e, "scheduler pass failed"),
                }
            }
        })
    }

    /// Refreshes the store's planner statistics in the background (a new rollout, or once a
    /// minute from the reconciler): cheap, and it keeps set-based reads on good plans.
    pub fn analyze_soon(&self) {
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.analyze().await {
                tracing::debug!(error = %e, "analyze failed");
            }
        });
    }

    /// One reconciler pass: drive every running Promotion, re-queue lost tasks, reclaim tasks
    /// whose worker stopped renewing its lease.
    pub async fn reconcile(&self) -> anyhow::Result<()> {
        let depth = self.queue.depth().await?;
        metrics::gauge!(telemetry::QUEUE_DEPTH).set(depth as f64);
        let grace = if depth == 0 { self.settings.requeue_grace } else { self.settings.requeue_grace * 10 };
        let jobs = promo::reconcile_tasks(&self.store, TimeDelta::from_std(grace)?).await?;
        if !jobs.is_empty() {
            tracing::info!(tasks = jobs.len(), "reconciler re-queued tasks");
        }
        self.enqueue(jobs).await;
        for p in promo::running_promotions(&self.store).await? {
            let jobs = promo::pump(&self.store, p).await?;
            self.enqueue(jobs).await;
        }
        Ok(())
    }

    fn lease(&self) -> TimeDelta {
        TimeDelta::from_std(self.settings.lease).unwrap_or(TimeDelta::seconds(30))
    }

    fn backoff(&self, attempt: u32) -> Duration {
        backoff(self.settings.backoff_base, self.settings.backoff_cap, attempt)
    }

    /// One delivery: claim, re-evaluate the entry gates, take the rate-limit permits, apply the
    /// Space with the task's end in the same transaction, queue what the wave driver says.
    /// Every outcome is classified here.
    pub async fn handle(&self, d: Delivery) -> Outcome {
        let span = tracing::info_span!(
            "job",
            task = %d.task,
            attempt = d.attempt,
            worker = %self.worker,
            promotion = tracing::field::Empty
        );
        let (label, outcome) = self.run(d).instrument(span).await;
        metrics::counter!(telemetry::JOBS, "outcome" => label).increment(1);
        outcome
    }

    async fn run(&self, d: Delivery) -> (&'static str, Outcome) {
        let asked = Instant::now();
        let generation = promo::job_generation(&d.key);
        let phase = |name: &'static str, since: Instant| {
            metrics::histogram!(telemetry::JOB_PHASE, "phase" => name).record(since.elapsed().as_secs_f64());
        };
        let t0 = Instant::now();
        let claimed = promo::claim(&self.store, d.task, generation, &self.worker, self.lease()).await;
        phase("claim", t0);
        let c = match claimed {
            Ok(Claim::Skip(why)) => {
                tracing::debug!(why, "nothing to do");
                return ("skipped", Outcome::Done);
            }
            Ok(Claim::Ended(jobs)) => {
                self.enqueue(jobs).await;
                return ("ended", Outcome::Done);
            }
            Ok(Claim::Run(c)) => c,
            Err(e) => return self.store_trouble(e),
        };
        tracing::Span::current().record("promotion", tracing::field::display(c.promotion.PromotionID));
        let started = Instant::now();
        // Gates, from current state, on every attempt.
        let failing = {
            let span = tracing::info_span!("gates", space = %c.space.Slug, stage = %c.task.Stage);
            match promo::gated_stage(&c) {
                None => vec![],
                Some(k) => {
                    let t0 = Instant::now();
                    let res = self.gates.failing(&self.store, &c.co, k, asked).instrument(span).await;
                    phase("gates", t0);
                    match res {
                        Ok(f) => f,
                        Err(e) => return self.retry_or_fail(&c, OpError::Internal(e)).await,
                    }
                }
            }
        };
        metrics::counter!(telemetry::GATE_VERDICTS, "result" => if failing.is_empty() { "open" } else { "closed" })
            .increment(1);
        if !failing.is_empty() {
            let after = self.backoff(c.task.Attempts);
            let reason = format!("blocked by {}", failing[0]);
            let gates: Vec<String> = failing.iter().map(|v| v.to_string()).collect();
            let due = Utc::now() + TimeDelta::from_std(after).unwrap_or_default();
            if let Err(e) =
                promo::release(&self.store, &c, TaskState::Blocked, reason.clone(), gates, due).await
            {
                return self.store_trouble(e);
            }
            tracing::info!(space = %c.space.Slug, %reason, retry_in = ?after, "blocked");
            return ("blocked", Outcome::Retry { after, reason });
        }
        let waited =
            self.limits.acquire(c.space.ReleaseTargetID, c.promotion.PromotionID, c.promotion.Rate).await;
        metrics::histogram!(telemetry::RATE_LIMIT_WAIT).record(waited.as_secs_f64());
        let renewal = self.keep_lease(&c);
        let span = tracing::info_span!("merge", space = %c.space.Slug, change_order = %c.co.Slug);
        let t0 = Instant::now();
        let res = promo::apply(&self.store, &c, &self.hooks).instrument(span).await;
        phase("apply", t0);
        renewal.abort();
        match res {
            Ok(sp) => {
                metrics::histogram!(telemetry::SPACE_SECONDS).record(started.elapsed().as_secs_f64());
                let t0 = Instant::now();
                let (jobs, ended) = match promo::drive(&self.store, c.promotion.PromotionID).await {
                    Ok(r) => r,
                    // The task is Done; the reconciler drives the Promotion on.
                    Err(e) => {
                        tracing::warn!(error = %e, "wave driver failed after a task ended");
                        (vec![], None)
                    }
                };
                phase("drive", t0);
                metrics::counter!(telemetry::UNITS).increment(sp.Plan.changed() as u64);
                if let Some(p) = ended {
                    self.finished(&p);
                }
                self.enqueue(jobs).await;
                ("done", Outcome::Done)
            }
            Err(e) => self.retry_or_fail(&c, e).await,
        }
    }

    /// Records the Promotion's latency once the driver ended it, and drops its rate limiter.
    fn finished(&self, p: &crate::model::Promotion) {
        self.limits.forget(p.PromotionID);
        if let Some(end) = p.FinishedAt {
            let secs = (end - p.CreatedAt).num_milliseconds() as f64 / 1000.0;
            metrics::histogram!(telemetry::PROMOTION_SECONDS).record(secs);
        }
    }

    /// Renews the lease every third of its length while the Space is applied.
    fn keep_lease(&self, c: &promo::Claimed) -> JoinHandle<()> {
        let (store, task, worker, lease) =
            (self.store.clone(), c.task.TaskID, self.worker.clone(), self.lease());
        let every = self.settings.lease / 3;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                match promo::renew_lease(&store, task, &worker, lease).await {
                    Ok(true) => {}
                    _ => return,
                }
            }
        })
    }

    /// A transient error is retried with backoff (until max_attempts); anything else fails the
    /// task with the error recorded.
    async fn retry_or_fail(&self, c: &promo::Claimed, e: OpError) -> (&'static str, Outcome) {
        let transient = promo::is_transient(&e) && c.task.Attempts < self.settings.max_attempts;
        let reason = e.to_string();
        if transient {
            let after = self.backoff(c.task.Attempts);
            let due = Utc::now() + TimeDelta::from_std(after).unwrap_or_default();
            let _ =
                promo::release(&self.store, c, TaskState::Queued, format!("retrying: {reason}"), vec![], due)
                    .await;
            tracing::warn!(space = %c.space.Slug, error = %reason, retry_in = ?after, "transient failure");
            ("retry", Outcome::Retry { after, reason })
        } else {
            match promo::release(&self.store, c, TaskState::Failed, reason.clone(), vec![], Utc::now()).await
            {
                Ok(jobs) => self.enqueue(jobs).await,
                Err(e) => return self.store_trouble(e),
            }
            tracing::warn!(space = %c.space.Slug, error = %reason, "task failed");
            ("failed", Outcome::Failed { reason })
        }
    }

    /// The store could not be reached or raced: try the job again shortly.
    fn store_trouble(&self, e: OpError) -> (&'static str, Outcome) {
        tracing::warn!(error = %e, "store trouble handling a job");
        ("retry", Outcome::Retry { after: Duration::from_secs(1), reason: e.to_string() })
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "host".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_jitters() {
        let base = Duration::from_secs(2);
        let cap = Duration::from_secs(60);
        for attempt in 1..30 {
            let b = backoff(base, cap, attempt);
            let step = (base * (1 << (attempt - 1).min(20))).min(cap);
            assert!(b >= Duration::from_secs(1), "at least a second");
            assert!(b <= step.max(Duration::from_secs(1)), "attempt {attempt}: {b:?} > {step:?}");
            assert!(b.as_secs_f64() >= (step.as_secs_f64() / 2.0).floor(), "attempt {attempt}: {b:?}");
        }
        let samples: std::collections::HashSet<_> = (0..50).map(|_| backoff(base, cap, 6)).collect();
        assert!(samples.len() > 1, "jitter spreads retries");
    }
}
