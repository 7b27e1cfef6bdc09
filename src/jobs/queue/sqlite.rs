//! The SQLite adapter (apalis-sqlite 1.0), the embedded default: jobs live in the `Jobs` table
//! of one SQLite file; the queue name is the row's `job_type`.
//!
//! Worked around here (see `research/deps.md`, Pitfalls):
//! - `SqliteStorage::setup` sets `synchronous = OFF` on one random pooled connection. We
//!   configure every connection ourselves (WAL, `synchronous = NORMAL`, a busy timeout) and
//!   run only apalis's migrations.
//! - The ack query is planned on index `LIdx (lock_by)` and scans every row the worker ever
//!   locked, so acks get slower with history (quadratic). We drop that index after migrating.

use super::{
    ConsumerOptions, Enqueued, Handler, Job, Queue, QueueError, Result, Shutdown, check_name, retry_key,
    run_one, supervise,
};
use apalis::prelude::*;
use apalis_core::backend::ext::BackendExt;
use apalis_core::error::{BoxDynError, WorkerError};
use apalis_sqlite::{Config, SqliteStorage};
use futures::future::BoxFuture;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use std::str::FromStr;
use std::time::Duration;
use uuid::Uuid;

/// A queue in a SQLite file; cheap to clone.
#[derive(Clone)]
pub struct SqliteQueue {
    pool: SqlitePool,
    name: String,
}

impl SqliteQueue {
    /// Opens (creating if missing) the SQLite file at `url` (`sqlite://PATH`) and selects queue
    /// `name`.
    pub async fn connect(url: &str, name: &str) -> Result<SqliteQueue> {
        check_name(name)?;
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new().max_connections(4).connect_with(options).await?;
        let mut migrator = SqliteStorage::<()>::migrations();
        // The file may hold other tables' migrations (the store's).
        migrator.set_ignore_missing(true);
        migrator.run(&pool).await.map_err(sqlx::Error::from)?;
        sqlx::query("DROP INDEX IF EXISTS LIdx").execute(&pool).await?;
        Ok(SqliteQueue { pool, name: name.to_string() })
    }

    /// The pool the queue runs on (its own connections, configured as above).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    async fn push(&self, job: &Job, key: &str, delay: Duration) -> Result<Enqueued> {
        let id = ulid::Ulid::generate();
        let mut b = TaskBuilder::new(job.clone())
            .task_id(TaskId::from_ulid(id))
            .idempotency_key(key)
            // Only consulted when a re-queue itself failed; see the module doc of `queue`.
            .max_attempts(3);
        if !delay.is_zero() {
            b = b.run_after(delay);
        }
        let mut storage = self.storage(Config::default().queue(&self.name));
        storage.push_task(b.build()).await.map_err(|e| QueueError::Backend(e.to_string()))?;
        // A duplicate key is dropped silently (ON CONFLICT DO NOTHING); our row tells.
        let found: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM Jobs WHERE id = ?")
            .bind(id.to_string())
            .fetch_one(&self.pool)
            .await?;
        Ok(if found > 0 { Enqueued::New } else { Enqueued::Duplicate })
    }

    fn storage(&self, config: Config) -> SqliteStorage<Job> {
        SqliteStorage::<Job>::new(&self.pool).with_config(config)
    }
}

impl Queue for SqliteQueue {
    fn enqueue<'a>(&'a self, task: Uuid, key: &'a str) -> BoxFuture<'a, Result<Enqueued>> {
        Box::pin(async move {
            self.push(&Job { task, key: key.to_string(), attempt: 1 }, key, Duration::ZERO).await
        })
    }

    fn depth(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(async move {
            let n: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM Jobs WHERE job_type = ? AND status = 'Pending' AND lock_by IS NULL",
            )
            .bind(&self.name)
            .fetch_one(&self.pool)
            .await?;
            Ok(n as u64)
        })
    }

    fn consume(
        &self,
        opts: ConsumerOptions,
        handler: Handler,
        shutdown: Shutdown,
    ) -> BoxFuture<'static, Result<()>> {
        let queue = self.clone();
        Box::pin(async move {
            let config = Config::default()
                .queue(&queue.name)
                .batch_size(opts.batch_size)
                .heartbeat_interval(opts.heartbeat)
                .missed_heartbeats(opts.missed_heartbeats);
            let ctx = Ctx { queue, handler, max_attempts: opts.max_attempts };
            supervise(&opts.name.clone(), shutdown.clone(), |name| {
                Box::pin(run_worker(ctx.clone(), name, config.clone(), opts.clone(), shutdown.clone()))
            })
            .await
        })
    }
}

/// What every delivery of a consumer needs.
#[derive(Clone)]
struct Ctx {
    queue: SqliteQueue,
    handler: Handler,
    max_attempts: u32,
}

async fn run_worker(
    ctx: Ctx,
    name: String,
    config: Config,
    opts: ConsumerOptions,
    shutdown: Shutdown,
) -> std::result::Result<(), WorkerError> {
    let storage = ctx.queue.storage(config).poll_with_interval(opts.poll_interval);
    WorkerBuilder::new(name)
        .backend(storage)
        .concurrency(opts.concurrency)
        .data(ctx)
        .build(deliver)
        .run_until(async move {
            shutdown.wait().await;
            Ok::<(), WorkerError>(())
        })
        .await
}

async fn deliver(job: Job, ctx: Data<Ctx>) -> std::result::Result<(), BoxDynError> {
    let queue = ctx.queue.clone();
    run_one(job, &ctx.handler, ctx.max_attempts, move |next, delay| {
        Box::pin(async move {
            let key = retry_key(&next.key, next.attempt);
            queue.push(&next, &key, delay.max(Duration::from_secs(1))).await.map(|_| ())
        })
    })
    .await
}
