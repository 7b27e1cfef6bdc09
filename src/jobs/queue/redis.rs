//! The Redis adapter (apalis-redis 1.0), for a fleet of workers.
//!
//! Keys live under `changeflow:{name}:…`, so queues (and tests) never share state (apalis-redis
//! also adds the queue to one global sorted set, `core:apalis:queues:list`).
//!
//! Worked around here (see `research/deps.md`, Pitfalls):
//! - apalis-redis puts *every* push in the `:scheduled` sorted set, and its fetch script moves
//!   all due IDs to `:active` with one `unpack`, which fails past 8,000 IDs and stops the
//!   worker. We move due IDs ourselves in chunks of [`PROMOTE_CHUNK`]: after every push, before
//!   every worker start, and every poll interval while consuming, so the fetch script never
//!   sees a large due set.
//! - The connection is a `ConnectionManager` with a 5 s response timeout (redis-rs's 500 ms
//!   default turns one stall under load into a dead worker).
//! - Idempotency keys get an explicit TTL ([`IDEMPOTENCY_TTL`]); the default deletes them.
//! - `missed_heartbeats` is set explicitly (apalis-redis's default is 10, not the documented 2).

use super::{
    ConsumerOptions, Enqueued, Handler, Job, Queue, QueueError, Result, Shutdown, check_name, retry_key,
    run_one, supervise,
};
use ::redis::aio::ConnectionManagerConfig;
use ::redis::{AsyncCommands, Client, Script};
use apalis::prelude::*;
use apalis_core::backend::ext::BackendExt;
use apalis_core::error::{BoxDynError, WorkerError};
use apalis_redis::{Config, ConnectionManager, RedisStorage, RedisTask};
use futures::future::BoxFuture;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use uuid::Uuid;

/// How long a used idempotency key is remembered. Must be set: apalis-redis 1.0 sends its
/// default (`None`, documented as "never expires") as `EXPIRE key 0`, which deletes the key at
/// once, so without a TTL no push is ever deduplicated.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// IDs moved from `:scheduled` to `:active` per script call; well under Lua's 8,000 limit.
pub const PROMOTE_CHUNK: usize = 1000;

/// Moves up to ARGV[2] due IDs (score ≤ ARGV[1]) from the scheduled set to the active list
/// and raises the signal apalis's fetch watches. Returns how many moved.
static PROMOTE_DUE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then return 0 end
redis.call('RPUSH', KEYS[2], unpack(due))
redis.call('ZREM', KEYS[1], unpack(due))
redis.call('DEL', KEYS[3])
redis.call('LPUSH', KEYS[3], 1)
return #due
",
    )
});

/// A queue on Redis; cheap to clone.
#[derive(Clone)]
pub struct RedisQueue {
    conn: ConnectionManager,
    config: Config,
}

impl RedisQueue {
    /// Connects to `url` (e.g. `redis://127.0.0.1:6379`) and selects queue `name`.
    pub async fn connect(url: &str, name: &str) -> Result<RedisQueue> {
        check_name(name)?;
        let client = Client::open(url)?;
        let manager = ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_connection_timeout(Some(Duration::from_secs(5)));
        let conn = client.get_connection_manager_with_config(manager).await?;
        let config = Config::default().queue(Self::prefix_of(name)).idempotency_ttl(Some(IDEMPOTENCY_TTL));
        Ok(RedisQueue { conn, config })
    }

    /// The key prefix of queue `name`: every key this queue writes starts with it, except
    /// apalis-redis's global `core:apalis:queues:list`, where each worker registers the queue.
    pub fn prefix_of(name: &str) -> String {
        format!("changeflow:{name}")
    }

    /// Moves every due scheduled job to the active list, a chunk at a time.
    pub async fn promote_due(&self) -> Result<u64> {
        promote_due(&mut self.conn.clone(), &self.config).await
    }

    async fn push(&self, job: &Job, key: &str, delay: Duration) -> Result<Enqueued> {
        let task = build_task(job, key, delay)?;
        let mut conn = self.conn.clone();
        let (now, later) = apalis_redis::queries::push_tasks(&mut conn, &self.config, &[task])
            .await
            .map_err(|e| QueueError::Backend(e.to_string()))?;
        if delay.is_zero() {
            promote_due(&mut conn, &self.config).await?;
        }
        Ok(if now + later > 0 { Enqueued::New } else { Enqueued::Duplicate })
    }
}

fn build_task(job: &Job, key: &str, delay: Duration) -> Result<RedisTask> {
    let bytes = serde_json::to_vec(job).map_err(|e| QueueError::Backend(e.to_string()))?;
    let mut b = TaskBuilder::new(bytes)
        .task_id(TaskId::from_ulid(ulid::Ulid::generate()))
        .idempotency_key(key)
        // Only consulted when a re-queue itself failed; handler outcomes never reach apalis's
        // retry path (see the module doc of `queue`).
        .max_attempts(3);
    if !delay.is_zero() {
        b = b.run_after(delay);
    }
    Ok(b.build())
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

async fn promote_due(conn: &mut ConnectionManager, config: &Config) -> Result<u64> {
    let mut total = 0u64;
    loop {
        let moved: u64 = PROMOTE_DUE
            .key(config.scheduled_jobs_set())
            .key(config.active_jobs_list())
            .key(config.signal_list())
            .arg(now_secs())
            .arg(PROMOTE_CHUNK)
            .invoke_async(conn)
            .await?;
        total += moved;
        if moved < PROMOTE_CHUNK as u64 {
            return Ok(total);
        }
    }
}

impl Queue for RedisQueue {
    fn enqueue<'a>(&'a self, task: Uuid, key: &'a str) -> BoxFuture<'a, Result<Enqueued>> {
        Box::pin(async move {
            self.push(&Job { task, key: key.to_string(), attempt: 1 }, key, Duration::ZERO).await
        })
    }

    fn depth(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let active: u64 = conn.llen(self.config.active_jobs_list()).await?;
            let scheduled: u64 = conn.zcard(self.config.scheduled_jobs_set()).await?;
            Ok(active + scheduled)
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
            // Keep the due part of `:scheduled` small while the worker runs.
            let maintenance = {
                let queue = queue.clone();
                let every = opts.poll_interval;
                tokio::spawn(async move {
                    loop {
                        if let Err(e) = queue.promote_due().await {
                            tracing::warn!(error = %e, "moving due jobs failed");
                        }
                        tokio::time::sleep(every).await;
                    }
                })
            };
            let config = queue
                .config
                .clone()
                .batch_size(opts.batch_size)
                .heartbeat_interval(opts.heartbeat)
                .missed_heartbeats(opts.missed_heartbeats);
            let ctx = Ctx { queue, handler, max_attempts: opts.max_attempts };
            let res = supervise(&opts.name.clone(), shutdown.clone(), |name| {
                Box::pin(run_worker(ctx.clone(), name, config.clone(), opts.clone(), shutdown.clone()))
            })
            .await;
            maintenance.abort();
            res
        })
    }
}

/// What every delivery of a consumer needs.
#[derive(Clone)]
struct Ctx {
    queue: RedisQueue,
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
    if let Err(e) = ctx.queue.promote_due().await {
        tracing::warn!(error = %e, "moving due jobs failed");
    }
    let storage = RedisStorage::<Job>::new(ctx.queue.conn.clone())
        .with_config(config)
        .poll_with_interval(opts.poll_interval);
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
