//! Schema migrations: numbered, applied once, each in its own transaction. The DDL is
//! portable between SQLite and PostgreSQL (TEXT, BIGINT), so one list serves both.

use super::{Backend, Result, Store};
use sqlx::Executor;

/// Every migration ever shipped, in order. Never edit one that has shipped; append.
const MIGRATIONS: &[(i64, &[&str])] = &[
    (
        1,
        &[
            "CREATE TABLE entities (
            kind TEXT NOT NULL,
            id TEXT NOT NULL PRIMARY KEY,
            space_id TEXT NOT NULL,
            slug TEXT NOT NULL,
            version BIGINT NOT NULL,
            body TEXT NOT NULL,
            UNIQUE (kind, space_id, slug))",
            "CREATE INDEX entities_by_container ON entities (kind, space_id)",
            "CREATE TABLE revisions (
            unit_id TEXT NOT NULL,
            revision_num BIGINT NOT NULL,
            revision_id TEXT NOT NULL UNIQUE,
            space_id TEXT NOT NULL,
            body TEXT NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (unit_id, revision_num))",
            "CREATE TABLE tokens (
            token_hash TEXT NOT NULL PRIMARY KEY,
            user_id TEXT NOT NULL,
            created_at TEXT NOT NULL)",
            "CREATE INDEX tokens_by_user ON tokens (user_id)",
        ],
    ),
    (
        2,
        &[
            // Which revisions carry a Tag or a ChangeOrder: the set-based index behind tag lookups,
            // ChangeOrder state and release bundling. Revision.Tags/ChangeOrders are read from here.
            "CREATE TABLE revision_marks (
            kind TEXT NOT NULL,
            mark_id TEXT NOT NULL,
            unit_id TEXT NOT NULL,
            revision_num BIGINT NOT NULL,
            space_id TEXT NOT NULL,
            PRIMARY KEY (kind, mark_id, unit_id, revision_num))",
            "CREATE INDEX revision_marks_by_unit ON revision_marks (unit_id, revision_num)",
            // Links as edges, so ChangeOrder state is a few set-based queries, whatever the fleet size.
            "CREATE TABLE link_edges (
            link_id TEXT NOT NULL PRIMARY KEY,
            space_id TEXT NOT NULL,
            from_unit_id TEXT NOT NULL,
            to_unit_id TEXT NOT NULL,
            to_space_id TEXT NOT NULL,
            update_type TEXT NOT NULL)",
            "CREATE INDEX link_edges_by_to_unit ON link_edges (to_unit_id)",
        ],
    ),
    (
        3,
        &[
            // Per-Space counts of a mark stream a covering index instead of sorting rows
            // (ChangeOrder state).
            "CREATE INDEX revision_marks_by_space ON revision_marks (kind, mark_id, space_id, unit_id, revision_num)",
            // A reached Space's edges, in Space order, for the pending-hops check.
            "CREATE INDEX link_edges_by_space ON link_edges (space_id, update_type)",
            // "Was this Unit released at or after revision N" without visiting table rows.
            "CREATE INDEX revision_marks_by_unit_kind ON revision_marks (unit_id, kind, revision_num)",
        ],
    ),
    (
        4,
        &[
            // Webhook secrets live apart from the entity, which the API returns.
            "CREATE TABLE webhook_secrets (webhook_id TEXT NOT NULL PRIMARY KEY, secret TEXT NOT NULL)",
            // Each delivery ID is accepted once.
            "CREATE TABLE webhook_deliveries (
            webhook_id TEXT NOT NULL,
            delivery_id TEXT NOT NULL,
            received_at TEXT NOT NULL,
            PRIMARY KEY (webhook_id, delivery_id))",
        ],
    ),
    (
        5,
        &[
            // A Promotion's task per Space. Columns the wave driver and reconciler select on;
            // the rest in body. Times are unix milliseconds (0: none).
            "CREATE TABLE promotion_tasks (
            task_id TEXT NOT NULL PRIMARY KEY,
            promotion_id TEXT NOT NULL,
            wave BIGINT NOT NULL,
            stage TEXT NOT NULL,
            space_id TEXT NOT NULL,
            state TEXT NOT NULL,
            due_at BIGINT NOT NULL,
            lease_until BIGINT NOT NULL,
            worker TEXT NOT NULL,
            version BIGINT NOT NULL,
            body TEXT NOT NULL,
            UNIQUE (promotion_id, space_id))",
            "CREATE INDEX promotion_tasks_by_wave ON promotion_tasks (promotion_id, wave, state)",
            "CREATE INDEX promotion_tasks_by_state ON promotion_tasks (state, due_at)",
            // The Links into one Space (its downstreams' cursors), read by every promotion
            // into it: without this, a scan of every edge in the fleet.
            "CREATE INDEX link_edges_by_to_space ON link_edges (to_space_id)",
        ],
    ),
];

pub(super) async fn run(store: &Store) -> Result<()> {
    let pool = store.pool();
    pool.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT NOT NULL PRIMARY KEY, applied_at TEXT NOT NULL)",
    )
    .await?;
    for (version, statements) in MIGRATIONS {
        let mut tx = pool.begin().await?;
        if store.backend() == Backend::Postgres {
            // Two processes starting at once must not both migrate.
            tx.execute("SELECT pg_advisory_xact_lock(7070)").await?;
        }
        let done: Option<(i64,)> = sqlx::query_as("SELECT version FROM schema_migrations WHERE version = $1")
            .bind(*version)
            .fetch_optional(&mut *tx)
            .await?;
        if done.is_some() {
            continue;
        }
        for s in *statements {
            tx.execute(*s).await?;
        }
        sqlx::query("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)")
            .bind(*version)
            .bind(chrono::Utc::now().to_rfc3339())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    Ok(())
}
