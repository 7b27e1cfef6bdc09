//! Starting and stopping the API process: `changeflow serve`, the demo and the tests all start
//! the server through [`start`].

use crate::api::{AppState, router};
use crate::jobs::queue::{ShutdownTrigger, shutdown_pair};
use crate::jobs::{JobSettings, Jobs};
use crate::ops;
use crate::store::Store;
use anyhow::Context;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Where the server keeps things and listens.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Holds the embedded database (unless `db` names another) and `admin.token`.
    pub data_dir: PathBuf,
    /// `127.0.0.1:7070`; port 0 picks a free port.
    pub listen: String,
    /// Store URL; default `sqlite://DATA_DIR/changeflow.db`.
    pub db: Option<String>,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Queue URL; default `sqlite://DATA_DIR/queue.db`.
    pub queue: Option<String>,
    /// The queue's name (a Redis key prefix): installs sharing a Redis use different names.
    pub queue_name: String,
    /// Run workers in this process (`serve --no-worker` turns them off).
    pub worker: bool,
    pub jobs: JobSettings,
}

impl ServeOptions {
    /// The embedded default in `data_dir`, listening on a free port.
    pub fn embedded(data_dir: PathBuf) -> ServeOptions {
        ServeOptions {
            data_dir,
            listen: "127.0.0.1:0".into(),
            db: None,
            max_body_bytes: crate::api::MAX_BODY_BYTES,
            queue: None,
            queue_name: "changeflow".into(),
            worker: true,
            jobs: JobSettings::default(),
        }
    }
}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    /// The bootstrap admin token when this start created it (first start on an empty store).
    pub new_admin_token: Option<String>,
    pub store: Store,
    /// The store and queue it was started with (for a `changeflow worker` beside it).
    pub db_url: String,
    pub queue_name: String,
    pub jobs: Jobs,
    shutdown: oneshot::Sender<()>,
    handle: JoinHandle<std::io::Result<()>>,
    background: (ShutdownTrigger, Vec<JoinHandle<()>>),
}

impl Server {
    /// The base URL clients use.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting requests, finishes in-flight ones, closes the store.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(());
        self.handle.await??;
        let (trigger, tasks) = self.background;
        trigger.trigger();
        for t in tasks {
            let _ = t.await;
        }
        self.store.close().await;
        Ok(())
    }

    /// Runs until the server stops by itself (it does not, short of an error).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.handle.await??;
        Ok(())
    }
}

/// Writes the admin token readable by its owner only.
fn write_token(path: &Path, token: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).with_context(|| format!("writing {}", path.display()))?;
    writeln!(f, "{token}")?;
    Ok(())
}

/// Opens the store, bootstraps the admin on first start, binds and serves in the background.
pub async fn start(opts: ServeOptions) -> anyhow::Result<Server> {
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("creating data dir {}", opts.data_dir.display()))?;
    let db = opts
        .db
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", opts.data_dir.join("changeflow.db").display()));
    let store = Store::connect(&db).await.with_context(|| format!("opening store {db}"))?;
    let new_admin_token = ops::bootstrap_admin(&store).await?;
    if let Some(t) = &new_admin_token {
        write_token(&opts.data_dir.join("admin.token"), t)?;
    }
    crate::telemetry::prometheus();
    let queue_url = opts
        .queue
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", opts.data_dir.join("queue.db").display()));
    let queue = crate::jobs::queue::open(&queue_url, &opts.queue_name)
        .await
        .with_context(|| format!("opening queue {queue_url}"))?;
    let jobs = Jobs::new(store.clone(), queue, opts.jobs.clone());
    let (trigger, stop) = shutdown_pair();
    let mut background = vec![jobs.spawn_reconciler(stop.clone()), jobs.spawn_scheduler(stop.clone())];
    if opts.worker {
        background.push(jobs.spawn_workers(stop));
    }
    let listener = tokio::net::TcpListener::bind(&opts.listen)
        .await
        .with_context(|| format!("listening on {}", opts.listen))?;
    let addr = listener.local_addr()?;
    let app = router(AppState { store: store.clone(), jobs: jobs.clone() }, opts.max_body_bytes);
    let (tx, rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
    });
    Ok(Server {
        addr,
        new_admin_token,
        store,
        db_url: db,
        queue_name: opts.queue_name.clone(),
        jobs,
        shutdown: tx,
        handle,
        background: (trigger, background),
    })
}
