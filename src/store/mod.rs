//! The system of record. One port, [`Store`], with two adapters chosen by URL:
//! `sqlite://PATH` (the embedded default: one file, WAL) and `postgres://…` (a fleet).
//!
//! Both adapters run the same portable SQL through sqlx's `Any` driver; what differs per engine
//! (connection pragmas, schema selection, write serialization, migration locking) lives in
//! `sqlite.rs` and `postgres.rs`. Entities are kept as JSON documents with their identity
//! columns (kind, id, container, slug, version) beside them, so a where expression is evaluated
//! by the one evaluator in `query` with identical semantics on both engines.
//!
//! Every write happens in a [`Tx`]: dropped without `commit`, it leaves nothing behind.

mod migrations;
mod postgres;
mod sqlite;
mod tx;

pub use tx::{MarkKind, Marked, Tx};

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use std::sync::Arc;
use thiserror::Error;
use tokio::sync::Mutex;

/// What can go wrong talking to the store. Variants name the entity and value at fault.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{kind} '{key}' not found")]
    NotFound { kind: &'static str, key: String },
    #[error("{kind} with Slug '{slug}' already exists in this container")]
    Duplicate { kind: &'static str, slug: String },
    #[error(
        "{kind} '{id}' was changed by someone else: you sent Version {sent}, it is now at a newer one; re-read and retry"
    )]
    VersionConflict { kind: &'static str, id: String, sent: i64 },
    #[error("concurrent write to {what}; retry")]
    Busy { what: String },
    #[error("unsupported store URL '{0}': expected sqlite://PATH or postgres://…")]
    BadUrl(String),
    #[error("stored {kind} could not be read: {reason}")]
    Corrupt { kind: &'static str, reason: String },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Which engine a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// SQLite allows one writer at a time; writers queue here instead of failing with
    /// SQLITE_BUSY half-way through a transaction. PostgreSQL needs no such lock.
    write_lock: Option<Arc<Mutex<()>>>,
}

impl Store {
    /// Connects and migrates. `sqlite://PATH` creates the file if missing;
    /// `postgres://…[?schema=NAME]` uses (and creates) the named schema.
    pub async fn connect(url: &str) -> Result<Store> {
        sqlx::any::install_default_drivers();
        let (backend, pool) = if url.starts_with("sqlite:") {
            (Backend::Sqlite, sqlite::connect(url).await?)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            (Backend::Postgres, postgres::connect(url).await?)
        } else {
            return Err(StoreError::BadUrl(url.to_string()));
        };
        let store = Store {
            pool,
            backend,
            write_lock: (backend == Backend::Sqlite).then(|| Arc::new(Mutex::new(()))),
        };
        migrations::run(&store).await?;
        Ok(store)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A transaction for reading: a consistent snapshot, never blocks writers.
    pub async fn read(&self) -> Result<Tx> {
        Tx::begin(self.pool.begin().await?, None).await
    }

    /// A transaction for writing; commit it with [`Tx::commit`].
    pub async fn write(&self) -> Result<Tx> {
        let guard = match &self.write_lock {
            Some(l) => Some(l.clone().lock_owned().await),
            None => None,
        };
        Tx::begin(self.pool.begin().await?, guard).await
    }

    /// Closes every connection (tests and graceful shutdown).
    /// Refreshes the query planner's statistics of the tables promotions read set-wise. On
    /// PostgreSQL a fleet built faster than autovacuum analyzes it otherwise gets plans that
    /// scan every mark per edge (measured: 30 s instead of 15 ms for one ChangeOrder read at
    /// 1,000 Spaces); SQLite's `PRAGMA optimize` does the same where it helps.
    pub async fn analyze(&self) -> Result<()> {
        use sqlx::Executor;
        let sql = match self.backend {
            Backend::Postgres => "ANALYZE revision_marks, link_edges, promotion_tasks, entities",
            Backend::Sqlite => "PRAGMA optimize",
        };
        self.pool.execute(sql).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }
}

fn pool_options() -> AnyPoolOptions {
    AnyPoolOptions::new().max_connections(8).acquire_timeout(std::time::Duration::from_secs(30))
}
