//! The queue port: enqueue a task ID under an idempotency key, count what waits, and run a
//! consumer that turns each delivery into an [`Outcome`]. Two adapters on apalis 1.0:
//! [`RedisQueue`] (a fleet) and [`SqliteQueue`] (the embedded default).
//!
//! What the port owns, so a handler never depends on the backend:
//! - **Retries.** apalis's own retry rules differ per backend (SQLite re-fetches at once, Redis
//!   ignores `max_attempts` and loops 25 times), so a handler never returns an error to apalis.
//!   [`Outcome::Retry`] pushes a fresh job for the same task, delayed, with `attempt + 1`;
//!   past [`ConsumerOptions::max_attempts`], or on [`Outcome::Failed`], the job ends as an
//!   apalis `AbortError`, a dead job in either backend. No apalis retry layer is installed.
//! - **Panics.** A handler runs in its own tokio task; a panic becomes a Retry.
//! - **Liveness.** Workers poll every [`ConsumerOptions::poll_interval`] (apalis otherwise
//!   waits for the 30 s heartbeat), carry a unique name per run, and are restarted under a new
//!   name if apalis stops them with an error (a Redis hiccup).
//!
//! Delivery is at least once: a handler must be idempotent.

mod redis;
mod sqlite;

pub use redis::{IDEMPOTENCY_TTL, PROMOTE_CHUNK, RedisQueue};
pub use sqlite::SqliteQueue;

use apalis_core::error::{AbortError, BoxDynError, WorkerError};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::watch;
use uuid::Uuid;

/// What can go wrong talking to the queue.
#[derive(Debug, Error)]
pub enum QueueError {
    #[error("invalid queue name '{0}': use 1-64 of [a-z0-9_-]")]
    BadName(String),
    #[error("unsupported queue URL '{0}': expected redis://… or sqlite://PATH")]
    BadUrl(String),
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    #[error("sqlite: {0}")]
    Sqlite(#[from] sqlx::Error),
    #[error("queue backend: {0}")]
    Backend(String),
}

pub type Result<T, E = QueueError> = std::result::Result<T, E>;

/// Whether [`Queue::enqueue`] added a job or found its idempotency key already used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    New,
    Duplicate,
}

/// One delivery of a job to a handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub task: Uuid,
    /// The idempotency key the job was first enqueued with.
    pub key: String,
    /// 1 on the first delivery, counting the handler's own Retry outcomes.
    pub attempt: u32,
}

/// What a handler decided; classified once, here, for every backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// Run again after `after` (whole seconds: both backends schedule by the second).
    Retry {
        after: Duration,
        reason: String,
    },
    /// Permanent: the job is dead, never retried.
    Failed {
        reason: String,
    },
}

/// The worker logic: any async function from a delivery to an outcome.
pub type Handler = Arc<dyn Fn(Delivery) -> BoxFuture<'static, Outcome> + Send + Sync>;

/// Wraps an async closure as a [`Handler`].
pub fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    Arc::new(move |d| Box::pin(f(d)))
}

/// How a consumer runs. Defaults suit production; tests shorten the heartbeat.
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// Prefix of the worker's name; a unique suffix is added per run (apalis refuses a name
    /// that is still alive, and orphans are recovered by *another* name).
    pub name: String,
    /// How often an idle worker looks for new jobs.
    pub poll_interval: Duration,
    /// Heartbeat period; a worker silent for `heartbeat × missed_heartbeats` is dead and its
    /// in-flight jobs go back to the queue.
    pub heartbeat: Duration,
    pub missed_heartbeats: usize,
    /// Deliveries per job, counting Retry outcomes; the last Retry becomes a dead job.
    pub max_attempts: u32,
    /// Jobs fetched per poll.
    pub batch_size: usize,
    /// Handlers running at once.
    pub concurrency: usize,
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        ConsumerOptions {
            name: "worker".into(),
            poll_interval: Duration::from_millis(100),
            heartbeat: Duration::from_secs(10),
            missed_heartbeats: 3,
            max_attempts: 25,
            batch_size: 100,
            concurrency: 64,
        }
    }
}

/// Tells consumers to stop; they finish the jobs in hand first.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// The sending side of [`Shutdown`].
#[derive(Debug)]
pub struct ShutdownTrigger(watch::Sender<bool>);

pub fn shutdown_pair() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger(tx), Shutdown(rx))
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        let _ = self.0.send(true);
    }
}

impl Shutdown {
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once triggered (or once the trigger is dropped).
    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|s| *s).await;
    }
}

/// The port. Object safe, so the server holds an `Arc<dyn Queue>` chosen by URL.
pub trait Queue: Send + Sync {
    /// Queues `task` now unless `key` was used before on this queue. A used key stays used after
    /// its job is done (Redis: for [`IDEMPOTENCY_TTL`]; SQLite: while the job row exists),
    /// so a caller that wants a task run again (the reconciler) uses a new key, e.g. with the
    /// task's attempt or generation in it.
    fn enqueue<'a>(&'a self, task: Uuid, key: &'a str) -> BoxFuture<'a, Result<Enqueued>>;

    /// Jobs waiting to be taken (due or scheduled), not counting those in flight.
    fn depth(&self) -> BoxFuture<'_, Result<u64>>;

    /// Runs a consumer until `shutdown`; restarts the apalis worker under a new name if it
    /// stops with an error.
    fn consume(
        &self,
        opts: ConsumerOptions,
        handler: Handler,
        shutdown: Shutdown,
    ) -> BoxFuture<'static, Result<()>>;
}

/// Opens the queue a URL names: `redis://…` or `sqlite://PATH`; `name` selects the queue.
pub async fn open(url: &str, name: &str) -> Result<Arc<dyn Queue>> {
    if url.starts_with("redis://") || url.starts_with("rediss://") {
        Ok(Arc::new(RedisQueue::connect(url, name).await?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteQueue::connect(url, name).await?))
    } else {
        Err(QueueError::BadUrl(url.to_string()))
    }
}

/// What travels in a job: the task, the original key, and the delivery count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Job {
    pub task: Uuid,
    pub key: String,
    pub attempt: u32,
}

pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok { Ok(()) } else { Err(QueueError::BadName(name.to_string())) }
}

/// The idempotency key of the job that retries `key` for the `attempt`-th delivery.
pub(crate) fn retry_key(key: &str, attempt: u32) -> String {
    format!("{key}#retry{attempt}")
}

/// Runs one delivery and maps its outcome onto apalis: `Ok` (done or re-queued) or an
/// `AbortError` (dead). `requeue` pushes the next attempt with a delay. An `Err` that is not
/// an abort only happens when the re-queue itself failed; the backend retries that job.
pub(crate) async fn run_one<R>(
    job: Job,
    handler: &Handler,
    max_attempts: u32,
    requeue: R,
) -> Result<(), BoxDynError>
where
    R: FnOnce(Job, Duration) -> BoxFuture<'static, Result<()>>,
{
    let delivery = Delivery { task: job.task, key: job.key.clone(), attempt: job.attempt };
    // Call the handler inside the task too: a closure may panic before returning its future.
    let h = handler.clone();
    let outcome = match tokio::spawn(async move { h(delivery).await }).await {
        Ok(o) => o,
        Err(e) => Outcome::Retry { after: Duration::from_secs(1), reason: format!("handler panicked: {e}") },
    };
    match outcome {
        Outcome::Done => Ok(()),
        Outcome::Retry { after, reason } if job.attempt < max_attempts => {
            tracing::debug!(task = %job.task, attempt = job.attempt, %reason, "retry");
            let next = Job { attempt: job.attempt + 1, ..job };
            requeue(next, after).await.map_err(|e| Box::new(e) as BoxDynError)
        }
        Outcome::Retry { reason, .. } => {
            Err(Box::new(AbortError::new(format!("gave up after {} attempts: {reason}", job.attempt))))
        }
        Outcome::Failed { reason } => Err(Box::new(AbortError::new(reason))),
    }
}

/// Runs worker generations until shutdown: each gets a fresh unique name; one that stops with
/// an error (a Redis timeout, a lost connection) is replaced after a short pause.
pub(crate) async fn supervise<F>(base: &str, shutdown: Shutdown, mut run: F) -> Result<()>
where
    F: FnMut(String) -> BoxFuture<'static, std::result::Result<(), WorkerError>>,
{
    let mut backoff = Duration::from_millis(200);
    loop {
        let name = format!("{base}-{}", ulid::Ulid::generate().to_string().to_lowercase());
        let res = run(name.clone()).await;
        if shutdown.is_triggered() {
            return Ok(());
        }
        match res {
            Ok(()) => return Ok(()),
            Err(e) => {
                tracing::warn!(worker = %name, error = %e, "queue worker stopped; restarting under a new name");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.clone().wait() => return Ok(()),
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}
