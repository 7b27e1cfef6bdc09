//! Load scenario: a fleet of N Spaces × M Units in three Stages, one ChangeOrder promoted
//! through all three by queue workers, beside a baseline measured in the same run: no-op jobs
//! through the same apalis backend with the same consumer settings.
//!
//! ```text
//! load-tests/run.sh                        # both set-ups, 1,000 Spaces × 10 Units
//! target/release/examples/load --setup embedded --spaces 200
//! ```
//!
//! Set-ups: `embedded` (one process: API, store and queue in SQLite files, workers in-process)
//! and `fleet` (store on PostgreSQL, queue on Redis, two `changeflow worker` processes).

use changeflow::jobs::queue::{self, ConsumerOptions, Outcome, handler, shutdown_pair};
use changeflow::server::{ServeOptions, start};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: NAME
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: web
          image: web:1.0
";

const WORKFLOW: &str = r#"Stages:
  - Name: dev
    WhereSpace: "Labels.Stage = 'dev'"
  - Name: staging
    WhereSpace: "Labels.Stage = 'staging'"
  - Name: prod
    WhereSpace: "Labels.Stage = 'prod'"
"#;

struct Args {
    setup: String,
    spaces: usize,
    units: usize,
    concurrency: usize,
    pg: String,
    redis: String,
}

fn args() -> Args {
    let mut a = Args {
        setup: "both".into(),
        spaces: 1000,
        units: 10,
        concurrency: 16,
        pg: std::env::var("CHANGEFLOW_TEST_PG")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into()),
        redis: std::env::var("CHANGEFLOW_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--setup" => a.setup = v,
            "--spaces" => a.spaces = v.parse().expect("--spaces N"),
            "--units" => a.units = v.parse().expect("--units N"),
            "--concurrency" => a.concurrency = v.parse().expect("--concurrency N"),
            other => panic!("unknown argument {other}; use --setup embedded|fleet|both --spaces N --units N"),
        }
    }
    a
}

/// Peak resident set of a process, in MiB (VmHWM).
fn peak_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

struct Api {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Api {
    fn of(server: &changeflow::server::Server) -> Arc<Api> {
        Arc::new(Api {
            http: reqwest::Client::new(),
            url: server.url(),
            token: server.new_admin_token.clone().expect("a fresh store bootstraps an admin"),
        })
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut r = self.http.request(method.clone(), format!("{}{path}", self.url)).bearer_auth(&self.token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.expect("request");
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }
    async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }
}

/// Builds base + N variants (10% dev, 30% staging, 60% prod), the workflow, the change and the
/// ChangeOrder. Variants are created 8 at a time.
async fn build_fleet(api: &Arc<Api>, spaces: usize, units: usize) {
    api.post("/v1/spaces", json!({"Slug": "ops"})).await;
    api.post("/v1/spaces", json!({"Slug": "base", "Labels": {"Component": "shop"}})).await;
    for u in 0..units {
        let data = WEB.replace("NAME", &format!("web{u}"));
        api.post("/v1/spaces/base/units", json!({"Slug": format!("web{u}"), "Data": data})).await;
    }
    let built = Instant::now();
    let mut handles = vec![];
    let next = Arc::new(AtomicUsize::new(0));
    for _ in 0..8 {
        let (api, next) = (api.clone(), next.clone());
        handles.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= spaces {
                    return;
                }
                let stage = match i * 10 / spaces {
                    0 => "dev",
                    1..=3 => "staging",
                    _ => "prod",
                };
                let body = json!({"Slug": format!("{stage}-{i:05}"), "Labels": {"Stage": stage}});
                api.post("/v1/spaces/base/variants", body).await;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    eprintln!("  built {spaces} variants × {units} units in {:.1} s", built.elapsed().as_secs_f64());
    api.post("/v1/spaces/ops/changeworkflows", json!({"Slug": "rollout", "Definition": WORKFLOW})).await;
    for u in 0..units {
        let data = WEB.replace("NAME", &format!("web{u}")).replace("web:1.0", "web:2.0");
        api.call(
            reqwest::Method::PATCH,
            &format!("/v1/spaces/base/units/web{u}"),
            Some(json!({"Data": data})),
        )
        .await;
    }
    api.post("/v1/spaces/base/changeorders", json!({"Slug": "bump", "ChangeWorkflow": "ops/rollout"})).await;
}

struct Run {
    seconds: f64,
    spaces: usize,
    units: u64,
    p50_ms: f64,
    p99_ms: f64,
}

/// Requests the promotion to prod and polls until it ends.
async fn promote(api: &Api) -> Run {
    let start = Instant::now();
    let p = api.post("/v1/spaces/base/changeorders/bump/promotions", json!({"TargetStage": "prod"})).await;
    let id = p["PromotionID"].as_str().unwrap().to_string();
    let done = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let p = api.call(reqwest::Method::GET, &format!("/v1/promotions/{id}?tasks=false"), None).await;
        if p["State"] != "Running" {
            break p;
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(done["State"], "Completed", "{done:#}");
    let done = api.call(reqwest::Method::GET, &format!("/v1/promotions/{id}"), None).await;
    let tasks = done["Tasks"].as_array().unwrap();
    let mut lat: Vec<f64> = tasks
        .iter()
        .filter_map(|t| {
            let s = chrono::DateTime::parse_from_rfc3339(t["StartedAt"].as_str()?).ok()?;
            let f = chrono::DateTime::parse_from_rfc3339(t["FinishedAt"].as_str()?).ok()?;
            Some((f - s).num_microseconds()? as f64 / 1000.0)
        })
        .collect();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |q: f64| lat.get(((lat.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    Run {
        seconds,
        spaces: tasks.len(),
        units: tasks.iter().map(|t| t["UnitsChanged"].as_u64().unwrap_or(0)).sum(),
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
    }
}

/// No-op jobs through the same backend and consumer settings: jobs per second.
async fn baseline(url: &str, name: &str, jobs: usize, concurrency: usize) -> f64 {
    let q = queue::open(url, name).await.expect("queue opens");
    for _ in 0..jobs {
        let id = uuid::Uuid::new_v4();
        q.enqueue(id, &id.to_string()).await.unwrap();
    }
    let seen = Arc::new(AtomicUsize::new(0));
    let (trigger, stop) = shutdown_pair();
    let s = seen.clone();
    let h = handler(move |_| {
        let s = s.clone();
        async move {
            s.fetch_add(1, Ordering::Relaxed);
            Outcome::Done
        }
    });
    let opts = ConsumerOptions {
        name: "baseline".into(),
        concurrency,
        batch_size: concurrency,
        max_attempts: u32::MAX,
        ..ConsumerOptions::default()
    };
    let start = Instant::now();
    let run = tokio::spawn(q.consume(opts, h, stop));
    while seen.load(Ordering::Relaxed) < jobs {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    trigger.trigger();
    let _ = run.await;
    jobs as f64 / secs
}

/// Mean time per job phase from the server's /metrics (in-process workers only).
async fn phases(api: &Api) {
    let text = reqwest::get(format!("{}/metrics", api.url)).await.unwrap().text().await.unwrap();
    let value = |name: &str, phase: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{phase=\"{phase}\"}}")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let mut parts = vec![];
    for phase in ["claim", "gates", "apply", "drive"] {
        if let (Some(sum), Some(n)) = (
            value("changeflow_job_phase_seconds_sum", phase),
            value("changeflow_job_phase_seconds_count", phase),
        ) {
            parts.push(format!("{phase} {:.1} ms", sum / n * 1000.0));
        }
    }
    if !parts.is_empty() {
        println!("  mean per job: {}", parts.join(", "));
    }
}

fn report(setup: &str, r: &Run, noop: f64, workers: usize, rss: f64) {
    let sps = r.spaces as f64 / r.seconds;
    println!(
        "{setup}: {} Spaces, {} Units changed through 3 Stages in {:.2} s",
        r.spaces, r.units, r.seconds
    );
    println!(
        "  {:.0} Spaces/s, {:.0} Units/s end to end ({workers} workers)",
        sps,
        r.units as f64 / r.seconds
    );
    println!("  per-Space apply latency p50 {:.1} ms, p99 {:.1} ms", r.p50_ms, r.p99_ms);
    println!(
        "  baseline: no-op jobs through the same apalis backend {noop:.0} jobs/s; job path = {:.2}× baseline",
        sps / noop
    );
    println!("  peak RSS (serve + workers): {rss:.0} MiB");
}

async fn embedded(a: &Args) {
    eprintln!("embedded: SQLite store and queue, workers in-process");
    let dir = tempfile::tempdir().unwrap();
    let mut opts = ServeOptions::embedded(dir.path().to_path_buf());
    opts.jobs.concurrency = a.concurrency;
    opts.jobs.reconcile_every = Duration::from_secs(1);
    let server = start(opts).await.expect("server");
    let api = Api::of(&server);
    build_fleet(&api, a.spaces, a.units).await;
    let run = promote(&api).await;
    let noop_url = format!("sqlite://{}", dir.path().join("baseline.db").display());
    let noop = baseline(&noop_url, "baseline", a.spaces, a.concurrency).await;
    let rss = peak_rss_mib(std::process::id());
    report("embedded (SQLite + SQLite queue)", &run, noop, 1, rss);
    phases(&api).await;
    server.stop().await.unwrap();
}

async fn fleet(a: &Args) {
    eprintln!("fleet: PostgreSQL store, Redis queue, two `changeflow worker` processes");
    let dir = tempfile::tempdir().unwrap();
    let schema = format!("load_{}", uuid::Uuid::new_v4().simple());
    let sep = if a.pg.contains('?') { '&' } else { '?' };
    let db = format!("{}{sep}schema={schema}", a.pg);
    let queue_name = format!("load{}", uuid::Uuid::new_v4().simple());
    let mut opts = ServeOptions::embedded(dir.path().to_path_buf());
    opts.db = Some(db.clone());
    opts.queue = Some(a.redis.clone());
    opts.queue_name = queue_name.clone();
    opts.worker = false;
    let server = start(opts).await.expect("server");
    let api = Api::of(&server);
    build_fleet(&api, a.spaces, a.units).await;
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(|p| p.parent()).unwrap().join("changeflow");
    assert!(bin.exists(), "build the binary first: cargo build --release --bin changeflow");
    let mut workers: Vec<std::process::Child> = (0..2)
        .map(|_| {
            std::process::Command::new(&bin)
                .args(["worker", "--db", &db, "--queue", &a.redis, "--queue-name", &queue_name])
                .args(["--concurrency", &a.concurrency.to_string()])
                .env("RUST_LOG", "changeflow=warn")
                .spawn()
                .expect("worker starts")
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let run = promote(&api).await;
    let rss: f64 =
        peak_rss_mib(std::process::id()) + workers.iter().map(|w| peak_rss_mib(w.id())).sum::<f64>();
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    let noop = baseline(&a.redis, &format!("{queue_name}-baseline"), a.spaces, a.concurrency * 2).await;
    report("fleet (PostgreSQL + Redis)", &run, noop, 2, rss);
    server.stop().await.unwrap();
}

#[tokio::main]
async fn main() {
    let a = args();
    if a.setup == "embedded" || a.setup == "both" {
        embedded(&a).await;
    }
    if a.setup == "fleet" || a.setup == "both" {
        fleet(&a).await;
    }
}
