//! The queue conformance suite: every test runs on SQLite (a file in a temp dir) and on the real
//! Redis at 127.0.0.1:6379 (`CHANGEFLOW_TEST_REDIS`), each test on its own queue name, whose
//! Redis keys are deleted when the fixture drops. Tests wait on conditions with deadlines.

use changeflow::jobs::queue::{
    self, ConsumerOptions, Delivery, Enqueued, Handler, Outcome, Queue, RedisQueue, Shutdown, ShutdownTrigger,
};
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use uuid::Uuid;

fn redis_url() -> String {
    std::env::var("CHANGEFLOW_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A queue of one backend under a unique name; deletes its Redis keys on drop.
struct Fixture {
    queue: Arc<dyn Queue>,
    backend: &'static str,
    name: String,
    _dir: tempfile::TempDir,
}

impl Fixture {
    async fn new(backend: &'static str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("t-{}", Uuid::new_v4().simple());
        let url = match backend {
            "sqlite" => format!("sqlite://{}", dir.path().join("queue.db").display()),
            "redis" => redis_url(),
            other => panic!("unknown backend {other}"),
        };
        let queue = queue::open(&url, &name).await.unwrap_or_else(|e| panic!("open {url}: {e}"));
        Fixture { queue, backend, name, _dir: dir }
    }

    /// Starts a consumer whose worker names begin with `worker`.
    fn consume(&self, worker: &str, handler: Handler) -> Consumer {
        let (trigger, shutdown): (ShutdownTrigger, Shutdown) = queue::shutdown_pair();
        let opts = ConsumerOptions {
            name: worker.into(),
            poll_interval: Duration::from_millis(100),
            heartbeat: Duration::from_secs(1),
            missed_heartbeats: 3,
            max_attempts: 3,
            ..ConsumerOptions::default()
        };
        let task = tokio::spawn(self.queue.consume(opts, handler, shutdown));
        Consumer { trigger, task }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if self.backend != "redis" {
            return;
        }
        let Ok(mut conn) = ::redis::Client::open(redis_url()).and_then(|c| c.get_connection()) else {
            return;
        };
        let pattern = format!("{}:*", RedisQueue::prefix_of(&self.name));
        let keys: Vec<String> = ::redis::cmd("KEYS").arg(&pattern).query(&mut conn).unwrap_or_default();
        // apalis-redis also lists every queue in one global key.
        let _: ::redis::RedisResult<()> = ::redis::cmd("ZREM")
            .arg("core:apalis:queues:list")
            .arg(pattern.replace('*', "workers"))
            .query(&mut conn);
        for chunk in keys.chunks(500) {
            let _: ::redis::RedisResult<()> = ::redis::cmd("DEL").arg(chunk).query(&mut conn);
        }
    }
}

struct Consumer {
    trigger: ShutdownTrigger,
    task: JoinHandle<queue::Result<()>>,
}

impl Consumer {
    async fn stop(self) {
        self.trigger.trigger();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("consumer stops")
            .unwrap()
            .expect("consumer ended cleanly");
    }
}

/// Every delivery seen, by task.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<Uuid, Vec<u32>>>>);

impl Seen {
    fn record(&self, d: &Delivery) {
        self.0.lock().unwrap().entry(d.task).or_default().push(d.attempt);
    }
    fn calls(&self, task: Uuid) -> Vec<u32> {
        self.0.lock().unwrap().get(&task).cloned().unwrap_or_default()
    }
    fn tasks(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn total(&self) -> usize {
        self.0.lock().unwrap().values().map(Vec::len).sum()
    }
}

/// A handler that records each delivery and answers Done.
fn recording(seen: &Seen) -> Handler {
    let seen = seen.clone();
    queue::handler(move |d| {
        seen.record(&d);
        async { Outcome::Done }
    })
}

/// Waits until `cond` holds, or panics with `what` after `deadline`.
async fn wait_until(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < deadline, "timed out after {deadline:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn a_job_is_delivered_and_done(fx: Fixture) {
    let seen = Seen::default();
    let task = Uuid::new_v4();
    assert_eq!(fx.queue.enqueue(task, "k1").await.unwrap(), Enqueued::New);
    let consumer = fx.consume("w", recording(&seen));
    wait_until("delivery", Duration::from_secs(10), || seen.calls(task) == [1]).await;
    let start = Instant::now();
    while fx.queue.depth().await.unwrap() != 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "queue empties");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    consumer.stop().await;
    assert_eq!(seen.total(), 1, "delivered once");
}

async fn an_idempotency_key_dedups(fx: Fixture) {
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    assert_eq!(fx.queue.enqueue(a, "promotion-1:space-1").await.unwrap(), Enqueued::New);
    assert_eq!(fx.queue.enqueue(b, "promotion-1:space-1").await.unwrap(), Enqueued::Duplicate);
    assert_eq!(fx.queue.enqueue(a, "promotion-1:space-1").await.unwrap(), Enqueued::Duplicate);
    assert_eq!(fx.queue.depth().await.unwrap(), 1);
    let seen = Seen::default();
    let consumer = fx.consume("w", recording(&seen));
    wait_until("delivery", Duration::from_secs(10), || seen.calls(a) == [1]).await;
    // A key stays used after its job is done.
    assert_eq!(fx.queue.enqueue(b, "promotion-1:space-1").await.unwrap(), Enqueued::Duplicate);
    consumer.stop().await;
    assert!(seen.calls(b).is_empty());
}

async fn retry_runs_again_and_failed_or_exhausted_stops(fx: Fixture) {
    let (recovers, fails, always_retries, panics) =
        (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let seen = Seen::default();
    let handler = {
        let seen = seen.clone();
        queue::handler(move |d| {
            seen.record(&d);
            if d.task == panics && d.attempt == 1 {
                panic!("handler bug");
            }
            let outcome = if d.task == fails || d.task == panics {
                Outcome::Failed { reason: "bad input".into() }
            } else if d.task == recovers && d.attempt >= 3 {
                Outcome::Done
            } else {
                Outcome::Retry { after: Duration::from_secs(1), reason: "gate closed".into() }
            };
            async move { outcome }
        })
    };
    for (t, k) in [(recovers, "a"), (fails, "b"), (always_retries, "c"), (panics, "d")] {
        fx.queue.enqueue(t, k).await.unwrap();
    }
    let start = Instant::now();
    let consumer = fx.consume("w", handler);
    wait_until("retries to finish", Duration::from_secs(30), || {
        seen.calls(recovers).len() == 3
            && seen.calls(always_retries).len() == 3
            && seen.calls(fails).len() == 1
    })
    .await;
    // Two retries of at least 1 s each.
    assert!(start.elapsed() >= Duration::from_secs(1), "a retry waits its delay: {:?}", start.elapsed());
    // Nothing more may happen: give a wrongly scheduled retry (1 s apart) time to show.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    consumer.stop().await;
    assert_eq!(seen.calls(recovers), [1, 2, 3]);
    assert_eq!(seen.calls(always_retries), [1, 2, 3], "max_attempts is respected");
    assert_eq!(seen.calls(fails), [1], "a Failed job is not retried");
    assert_eq!(seen.calls(panics), [1, 2], "a panic is retried like Retry, then Failed stops it");
    assert_eq!(fx.queue.depth().await.unwrap(), 0);
}

async fn an_idle_worker_starts_a_new_job_within_a_second(fx: Fixture) {
    let seen = Seen::default();
    let consumer = fx.consume("w", recording(&seen));
    let warmup = Uuid::new_v4();
    fx.queue.enqueue(warmup, "warmup").await.unwrap();
    wait_until("warm-up delivery", Duration::from_secs(10), || seen.calls(warmup).len() == 1).await;
    for i in 0..3 {
        // Let the worker find the queue empty and go idle.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let task = Uuid::new_v4();
        let pushed = Instant::now();
        fx.queue.enqueue(task, &format!("k{i}")).await.unwrap();
        wait_until("pickup", Duration::from_secs(35), || !seen.calls(task).is_empty()).await;
        let latency = pushed.elapsed();
        eprintln!("{}: pickup latency {latency:?}", fx.backend);
        assert!(latency < Duration::from_secs(1), "{}: an idle worker took {latency:?}", fx.backend);
    }
    consumer.stop().await;
}

async fn twenty_thousand_queued_jobs_drain(fx: Fixture) {
    const N: usize = 20_000;
    let start = Instant::now();
    let pushed: Vec<Enqueued> = futures::stream::iter(0..N)
        .map(|i| {
            let q = fx.queue.clone();
            async move { q.enqueue(Uuid::new_v4(), &format!("bulk-{i}")).await.unwrap() }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(pushed.iter().all(|e| *e == Enqueued::New));
    let push_time = start.elapsed();
    assert_eq!(fx.queue.depth().await.unwrap(), N as u64);
    let seen = Seen::default();
    let start = Instant::now();
    let consumer = fx.consume("w", recording(&seen));
    wait_until("drain", Duration::from_secs(60), || seen.tasks() == N).await;
    let drain_time = start.elapsed();
    eprintln!(
        "{}: pushed {N} in {push_time:?} ({:.0}/s), drained in {drain_time:?} ({:.0}/s)",
        fx.backend,
        N as f64 / push_time.as_secs_f64(),
        N as f64 / drain_time.as_secs_f64()
    );
    consumer.stop().await;
    assert_eq!(seen.total(), N, "each job delivered once");
    assert_eq!(fx.queue.depth().await.unwrap(), 0);
}

async fn a_new_worker_recovers_what_a_dead_one_held(fx: Fixture) {
    let tasks: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    for (i, t) in tasks.iter().enumerate() {
        fx.queue.enqueue(*t, &format!("k{i}")).await.unwrap();
    }
    // The first worker takes the jobs and hangs on them.
    let held = Seen::default();
    let hanging = {
        let held = held.clone();
        queue::handler(move |d| {
            held.record(&d);
            futures::future::pending::<Outcome>()
        })
    };
    let first = fx.consume("w", hanging);
    wait_until("the first worker holds every job", Duration::from_secs(10), || held.tasks() == 3).await;
    // It dies without a word: no release, no more heartbeats.
    first.task.abort();
    let died = Instant::now();
    // The replacement starts at once under the same configured name (each run gets a unique
    // suffix: apalis refuses a name still inside its orphan window) and works on new jobs
    // before the old one's jobs come back.
    let fresh = Uuid::new_v4();
    fx.queue.enqueue(fresh, "fresh").await.unwrap();
    let seen = Seen::default();
    let second = fx.consume("w", recording(&seen));
    wait_until("a fresh job, before the orphan window ends", Duration::from_secs(2), || {
        !seen.calls(fresh).is_empty()
    })
    .await;
    wait_until("the second worker to recover the orphans", Duration::from_secs(20), || {
        tasks.iter().all(|t| !seen.calls(*t).is_empty())
    })
    .await;
    eprintln!("{}: orphans recovered {:?} after the first worker died", fx.backend, died.elapsed());
    second.stop().await;
    drop(first.trigger);
}

/// Redis only: when apalis stops a worker with an error (here: its registration vanished, as
/// after a Redis flush; in production also a response timeout), the consumer goes on under a
/// new worker name instead of silently ending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_worker_stopped_by_an_error_is_replaced() {
    let fx = Fixture::new("redis").await;
    let workers = apalis_redis::Config::default().queue(RedisQueue::prefix_of(&fx.name)).workers_set();
    let mut conn = ::redis::Client::open(redis_url()).unwrap().get_connection_manager().await.unwrap();
    let seen = Seen::default();
    let consumer = fx.consume("w", recording(&seen));
    let first = Uuid::new_v4();
    fx.queue.enqueue(first, "first").await.unwrap();
    wait_until("first delivery", Duration::from_secs(10), || !seen.calls(first).is_empty()).await;
    let before: Vec<String> =
        ::redis::cmd("ZRANGE").arg(&workers).arg(0).arg(-1).query_async(&mut conn).await.unwrap();
    let _: () = ::redis::cmd("DEL").arg(&workers).query_async(&mut conn).await.unwrap();
    let second = Uuid::new_v4();
    fx.queue.enqueue(second, "second").await.unwrap();
    wait_until("delivery after the worker failed", Duration::from_secs(10), || {
        !seen.calls(second).is_empty()
    })
    .await;
    let after: Vec<String> =
        ::redis::cmd("ZRANGE").arg(&workers).arg(0).arg(-1).query_async(&mut conn).await.unwrap();
    assert!(
        after.iter().any(|w| w.starts_with("w-") && !before.contains(w)),
        "a new worker: {before:?} -> {after:?}"
    );
    consumer.stop().await;
}

/// SQLite only: every pooled connection is durable (apalis's `setup` would leave one with
/// `synchronous = OFF`) and the index that makes acks quadratic is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_connections_are_configured_and_the_ack_index_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("queue.db").display());
    let q = queue::SqliteQueue::connect(&url, "pragmas").await.unwrap();
    let mut conns = Vec::new();
    for _ in 0..4 {
        conns.push(q.pool().acquire().await.unwrap());
    }
    for c in conns.iter_mut() {
        let journal: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(&mut **c).await.unwrap();
        let sync: i64 = sqlx::query_scalar("PRAGMA synchronous").fetch_one(&mut **c).await.unwrap();
        let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout").fetch_one(&mut **c).await.unwrap();
        assert_eq!(
            (journal.as_str(), sync, busy),
            ("wal", 1, 5000),
            "WAL, synchronous=NORMAL, 5 s busy timeout"
        );
    }
    drop(conns);
    let lidx: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'LIdx'")
            .fetch_one(q.pool())
            .await
            .unwrap();
    assert_eq!(lidx, 0);
    // Reopening (a restart) migrates again without error and keeps the index dropped.
    drop(q);
    let q = queue::SqliteQueue::connect(&url, "pragmas").await.unwrap();
    let lidx: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'LIdx'")
        .fetch_one(q.pool())
        .await
        .unwrap();
    assert_eq!(lidx, 0);
}

/// Redis only: apalis-redis's fetch script moves every due ID from `:scheduled` in one Lua
/// `unpack`, which fails past 8,000 IDs and stops the worker. Jobs pushed by apalis itself (not
/// through the port, which moves them at once) all land there; the consumer must still drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_due_backlog_beyond_8000_in_the_scheduled_set_drains() {
    use apalis_core::task::builder::TaskBuilder;
    use apalis_core::task::task_id::TaskId;
    const N: usize = 20_000;
    let fx = Fixture::new("redis").await;
    let config = apalis_redis::Config::default().queue(RedisQueue::prefix_of(&fx.name));
    let mut conn = ::redis::Client::open(redis_url()).unwrap().get_connection_manager().await.unwrap();
    for chunk in 0..N / 1000 {
        let tasks: Vec<_> = (0..1000)
            .map(|i| {
                let job = serde_json::json!({"task": Uuid::new_v4(), "key": format!("raw-{chunk}-{i}"), "attempt": 1});
                TaskBuilder::new(serde_json::to_vec(&job).unwrap()).task_id(TaskId::from_ulid(ulid::Ulid::generate())).build()
            })
            .collect();
        apalis_redis::queries::push_tasks(&mut conn, &config, &tasks).await.unwrap();
    }
    let scheduled: u64 =
        ::redis::cmd("ZCARD").arg(config.scheduled_jobs_set()).query_async(&mut conn).await.unwrap();
    assert_eq!(scheduled, N as u64, "the backlog sits in the scheduled set, as apalis leaves it");
    let seen = Seen::default();
    let start = Instant::now();
    let consumer = fx.consume("w", recording(&seen));
    wait_until("drain", Duration::from_secs(60), || seen.tasks() == N).await;
    eprintln!("redis: drained a scheduled backlog of {N} in {:?}", start.elapsed());
    consumer.stop().await;
    assert_eq!(fx.queue.depth().await.unwrap(), 0);
}

macro_rules! suite {
    ($backend:ident: $($name:ident),* $(,)?) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Fixture::new(stringify!($backend)).await).await;
                }
            )*
        }
    };
}

suite!(sqlite: a_job_is_delivered_and_done, an_idempotency_key_dedups, retry_runs_again_and_failed_or_exhausted_stops,
    an_idle_worker_starts_a_new_job_within_a_second, twenty_thousand_queued_jobs_drain,
    a_new_worker_recovers_what_a_dead_one_held);
suite!(redis: a_job_is_delivered_and_done, an_idempotency_key_dedups, retry_runs_again_and_failed_or_exhausted_stops,
    an_idle_worker_starts_a_new_job_within_a_second, twenty_thousand_queued_jobs_drain,
    a_new_worker_recovers_what_a_dead_one_held);
