//! Test fixtures: stores on a fresh SQLite file or a fresh PostgreSQL schema, and a running
//! server with its admin token.

use changeflow::server::{ServeOptions, Server, start};
use changeflow::store::Store;
use serde_json::Value;
use std::time::Duration;

/// The PostgreSQL the tests use (`scripts/test` exports it).
pub fn pg_base() -> String {
    std::env::var("CHANGEFLOW_TEST_PG").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A store URL of the given backend, isolated from every other test.
pub fn isolated_url(backend: &str, dir: &std::path::Path) -> String {
    match backend {
        "sqlite" => format!("sqlite://{}", dir.join("store.db").display()),
        "postgres" => {
            let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
            let base = pg_base();
            let sep = if base.contains('?') { '&' } else { '?' };
            format!("{base}{sep}schema={schema}")
        }
        other => panic!("unknown backend {other}"),
    }
}

/// A store on `backend` plus the temp dir that holds it (keep it alive).
pub async fn store(backend: &str) -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = isolated_url(backend, dir.path());
    let store = Store::connect(&url).await.unwrap_or_else(|e| panic!("connect {url}: {e}"));
    (store, dir)
}

/// A running server on `backend` with an HTTP client authenticated as admin.
pub struct App {
    pub server: Option<Server>,
    pub url: String,
    pub token: String,
    pub http: reqwest::Client,
    pub dir: tempfile::TempDir,
}

pub async fn spawn_app(backend: &str) -> App {
    spawn_app_with(backend, "sqlite", |_| {}).await
}

/// The Redis the tests use.
pub fn redis_url() -> String {
    std::env::var("CHANGEFLOW_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// Job settings fast enough for tests: leases of 3 s, reconciling every second, retries after
/// one or two seconds.
pub fn fast_jobs() -> changeflow::jobs::JobSettings {
    changeflow::jobs::JobSettings {
        lease: Duration::from_secs(3),
        reconcile_every: Duration::from_millis(500),
        requeue_grace: Duration::from_secs(2),
        backoff_base: Duration::from_secs(1),
        backoff_cap: Duration::from_secs(2),
        schedule_every: Duration::from_millis(200),
        ..Default::default()
    }
}

/// A server with its store on `backend` and its queue on `queue` (`sqlite`: a file beside the
/// store; `redis`: the test Redis under a queue name of its own), after `tweak`.
pub async fn spawn_app_with(backend: &str, queue: &str, tweak: impl FnOnce(&mut ServeOptions)) -> App {
    let dir = tempfile::tempdir().unwrap();
    let db = isolated_url(backend, dir.path());
    let mut opts = ServeOptions::embedded(dir.path().to_path_buf());
    opts.db = Some(db);
    opts.jobs = fast_jobs();
    match queue {
        "sqlite" => {}
        "redis" => {
            opts.queue = Some(redis_url());
            opts.queue_name = format!("t{}", uuid::Uuid::new_v4().simple());
        }
        other => panic!("unknown queue {other}"),
    }
    tweak(&mut opts);
    let server = start(opts).await.expect("server starts");
    let token = server.new_admin_token.clone().expect("fresh store bootstraps an admin");
    let url = server.url();
    App { server: Some(server), url, token, http: reqwest::Client::new(), dir }
}

/// A response: status and JSON body (Null when empty or not JSON).
pub struct Resp {
    pub status: u16,
    pub body: Value,
    pub text: String,
}

impl App {
    pub async fn call(&self, method: &str, path: &str, token: Option<&str>, body: Option<Value>) -> Resp {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(m, format!("{}{path}", self.url)).timeout(Duration::from_secs(60));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.expect("request sent");
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Resp { status, body, text }
    }

    /// As admin.
    pub async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> Resp {
        self.call(method, path, Some(&self.token.clone()), body).await
    }

    /// As admin, asserting a 2xx.
    pub async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let r = self.admin(method, path, body).await;
        assert!((200..300).contains(&r.status), "{method} {path}: {} {}", r.status, r.text);
        r.body
    }

    /// How many Units the store holds, read directly (not over a possibly closed connection).
    pub async fn store_units(&self) -> usize {
        let store = &self.server.as_ref().unwrap().store;
        let mut tx = store.read().await.unwrap();
        tx.list::<changeflow::model::Unit>(None).await.unwrap().len()
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.server.take() {
            s.stop().await.unwrap();
        }
    }
}
