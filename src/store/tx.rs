//! A store transaction: typed reads and writes of entities, revisions and tokens.

use super::{Result, StoreError};
use crate::model::{Entity, Revision, UpdateType};
use sqlx::any::{Any, AnyQueryResult};
use sqlx::{Row, Transaction};
use std::collections::HashMap;
use tokio::sync::OwnedMutexGuard;

mod tasks;
use uuid::Uuid;

/// One transaction. Dropping it without [`Tx::commit`] rolls everything back.
pub struct Tx {
    tx: Transaction<'static, Any>,
    _write_guard: Option<OwnedMutexGuard<()>>,
    queries: u64,
}

/// What can mark a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkKind {
    Tag,
    ChangeOrder,
    /// The revisions a Release bundled.
    Release,
}

impl MarkKind {
    fn column(self) -> &'static str {
        match self {
            MarkKind::Tag => "Tag",
            MarkKind::ChangeOrder => "ChangeOrder",
            MarkKind::Release => "Release",
        }
    }

    fn from_column(s: &str) -> Option<MarkKind> {
        match s {
            "Tag" => Some(MarkKind::Tag),
            "ChangeOrder" => Some(MarkKind::ChangeOrder),
            "Release" => Some(MarkKind::Release),
            _ => None,
        }
    }
}

/// One marked revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marked {
    pub unit: Uuid,
    pub space: Uuid,
    pub revision_num: i64,
}

/// The container column: top-level entities (Spaces, Users) use the empty string so the
/// `(kind, space_id, slug)` uniqueness constraint covers them too.
fn container(space: Option<Uuid>) -> String {
    space.map(|s| s.to_string()).unwrap_or_default()
}

fn decode<E: Entity>(body: &str) -> Result<E> {
    serde_json::from_str(body).map_err(|e| StoreError::Corrupt { kind: E::KIND, reason: e.to_string() })
}

fn parse_uuid(s: &str) -> Result<Uuid> {
    s.parse().map_err(|e: uuid::Error| StoreError::Corrupt { kind: "ID", reason: e.to_string() })
}

fn count_by_space(rows: &[sqlx::any::AnyRow]) -> Result<HashMap<Uuid, i64>> {
    rows.iter().map(|r| Ok((parse_uuid(&r.get::<String, _>(0))?, r.get::<i64, _>(1)))).collect()
}

fn decode_revision(body: &str) -> Result<Revision> {
    serde_json::from_str(body).map_err(|e| StoreError::Corrupt { kind: "Revision", reason: e.to_string() })
}

fn encode<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("entities always serialize")
}

/// Maps a unique-constraint violation to a domain error; everything else passes through.
fn unique_as(e: sqlx::Error, on_unique: impl FnOnce() -> StoreError) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => on_unique(),
        _ => StoreError::Database(e),
    }
}

impl Tx {
    pub(super) async fn begin(
        tx: Transaction<'static, Any>,
        guard: Option<OwnedMutexGuard<()>>,
    ) -> Result<Tx> {
        Ok(Tx { tx, _write_guard: guard, queries: 0 })
    }

    /// The connection, counting each statement sent (see [`Tx::query_count`]).
    fn conn(&mut self) -> &mut sqlx::AnyConnection {
        self.queries += 1;
        &mut self.tx
    }

    /// How many statements this transaction has sent: lets tests hold reads to a bounded count.
    pub fn query_count(&self) -> u64 {
        self.queries
    }

    /// Makes every write of this transaction durable at once.
    pub async fn commit(self) -> Result<()> {
        self.tx.commit().await?;
        Ok(())
    }

    /// Reads an entity by ID.
    pub async fn get<E: Entity>(&mut self, id: Uuid) -> Result<Option<E>> {
        let row = sqlx::query("SELECT body FROM entities WHERE id = $1 AND kind = $2")
            .bind(id.to_string())
            .bind(E::KIND)
            .fetch_optional(self.conn())
            .await?;
        row.map(|r| decode(&r.get::<String, _>(0))).transpose()
    }

    /// Reads an entity by ID, or fails with NotFound.
    pub async fn must_get<E: Entity>(&mut self, id: Uuid) -> Result<E> {
        self.get(id).await?.ok_or_else(|| StoreError::NotFound { kind: E::KIND, key: id.to_string() })
    }

    /// Reads an entity by Slug in its container (`None` for top-level entities).
    pub async fn find<E: Entity>(&mut self, space: Option<Uuid>, slug: &str) -> Result<Option<E>> {
        let row = sqlx::query("SELECT body FROM entities WHERE kind = $1 AND space_id = $2 AND slug = $3")
            .bind(E::KIND)
            .bind(container(space))
            .bind(slug)
            .fetch_optional(self.conn())
            .await?;
        row.map(|r| decode(&r.get::<String, _>(0))).transpose()
    }

    /// Lists the entities of one container, or of every container with `None`, by Slug.
    pub async fn list<E: Entity>(&mut self, space: Option<Uuid>) -> Result<Vec<E>> {
        let rows = match space {
            Some(s) => {
                sqlx::query("SELECT body FROM entities WHERE kind = $1 AND space_id = $2 ORDER BY slug")
                    .bind(E::KIND)
                    .bind(s.to_string())
                    .fetch_all(self.conn())
                    .await?
            }
            None => {
                sqlx::query("SELECT body FROM entities WHERE kind = $1 ORDER BY space_id, slug")
                    .bind(E::KIND)
                    .fetch_all(self.conn())
                    .await?
            }
        };
        rows.iter().map(|r| decode(&r.get::<String, _>(0))).collect()
    }

    /// Inserts a new entity; a Slug already taken in the container is `Duplicate`.
    pub async fn insert<E: Entity>(&mut self, e: &E) -> Result<()> {
        sqlx::query(
            "INSERT INTO entities (kind, id, space_id, slug, version, body) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(E::KIND)
        .bind(e.id().to_string())
        .bind(container(e.space_id()))
        .bind(e.slug())
        .bind(e.version())
        .bind(encode(e))
        .execute(self.conn())
        .await
        .map_err(|err| {
            unique_as(err, || StoreError::Duplicate { kind: E::KIND, slug: e.slug().to_string() })
        })?;
        if let Some(edge) = e.link_edge() {
            sqlx::query(
                "INSERT INTO link_edges (link_id, space_id, from_unit_id, to_unit_id, to_space_id, update_type)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(edge.link.to_string())
            .bind(edge.space.to_string())
            .bind(edge.from_unit.to_string())
            .bind(edge.to_unit.to_string())
            .bind(edge.to_space.to_string())
            .bind(edge.update_type.as_str())
            .execute(self.conn())
            .await?;
        }
        Ok(())
    }

    /// Writes `e` if the stored Version still equals `e`'s; bumps the Version and UpdatedAt.
    /// A stale Version is refused with `VersionConflict` and nothing is written.
    pub async fn update<E: Entity>(&mut self, e: &mut E) -> Result<()> {
        let sent = e.version();
        e.set_version(sent + 1);
        e.set_updated_at(chrono::Utc::now());
        let res: std::result::Result<AnyQueryResult, _> = sqlx::query(
            "UPDATE entities SET version = $1, slug = $2, body = $3 WHERE id = $4 AND kind = $5 AND version = $6",
        )
        .bind(e.version())
        .bind(e.slug())
        .bind(encode(e))
        .bind(e.id().to_string())
        .bind(E::KIND)
        .bind(sent)
        .execute(self.conn())
        .await;
        let res = res.map_err(|err| {
            unique_as(err, || StoreError::Duplicate { kind: E::KIND, slug: e.slug().to_string() })
        });
        match res {
            Ok(r) if r.rows_affected() == 1 => Ok(()),
            Ok(_) => {
                e.set_version(sent);
                match self.get::<E>(e.id()).await? {
                    Some(_) => {
                        Err(StoreError::VersionConflict { kind: E::KIND, id: e.id().to_string(), sent })
                    }
                    None => Err(StoreError::NotFound { kind: E::KIND, key: e.id().to_string() }),
                }
            }
            Err(err) => {
                e.set_version(sent);
                Err(err)
            }
        }
    }

    /// Deletes an entity by ID; returns whether it existed. Deleting a Unit deletes its revisions.
    pub async fn delete<E: Entity>(&mut self, id: Uuid) -> Result<bool> {
        let r = sqlx::query("DELETE FROM entities WHERE id = $1 AND kind = $2")
            .bind(id.to_string())
            .bind(E::KIND)
            .execute(self.conn())
            .await?;
        if E::KIND == "Webhook" {
            for sql in [
                "DELETE FROM webhook_secrets WHERE webhook_id = $1",
                "DELETE FROM webhook_deliveries WHERE webhook_id = $1",
            ] {
                sqlx::query(sql).bind(id.to_string()).execute(self.conn()).await?;
            }
        }
        if E::KIND == "Link" {
            sqlx::query("DELETE FROM link_edges WHERE link_id = $1")
                .bind(id.to_string())
                .execute(self.conn())
                .await?;
        }
        if E::KIND == "Unit" {
            for sql in
                ["DELETE FROM revisions WHERE unit_id = $1", "DELETE FROM revision_marks WHERE unit_id = $1"]
            {
                sqlx::query(sql).bind(id.to_string()).execute(self.conn()).await?;
            }
        }
        Ok(r.rows_affected() == 1)
    }

    /// Appends a revision. Its number must be new for the Unit: a concurrent writer that took
    /// the same number makes this fail with `Busy`, and the whole transaction is abandoned.
    pub async fn insert_revision(&mut self, rev: &Revision, data: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO revisions (unit_id, revision_num, revision_id, space_id, body, data) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(rev.UnitID.to_string())
        .bind(rev.RevisionNum)
        .bind(rev.RevisionID.to_string())
        .bind(rev.SpaceID.to_string())
        .bind(encode(rev))
        .bind(data)
        .execute(self.conn())
        .await
        .map_err(|e| {
            unique_as(e, || StoreError::Busy { what: format!("revision {} of unit {}", rev.RevisionNum, rev.UnitID) })
        })?;
        Ok(())
    }

    /// Rewrites a revision's metadata (tags, change orders, validation results). Its data is
    /// immutable and never touched here.
    pub async fn update_revision_meta(&mut self, rev: &Revision) -> Result<()> {
        sqlx::query("UPDATE revisions SET body = $1 WHERE unit_id = $2 AND revision_num = $3")
            .bind(encode(rev))
            .bind(rev.UnitID.to_string())
            .bind(rev.RevisionNum)
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// One revision with its data.
    pub async fn revision(&mut self, unit: Uuid, num: i64) -> Result<Option<(Revision, String)>> {
        let row = sqlx::query("SELECT body, data FROM revisions WHERE unit_id = $1 AND revision_num = $2")
            .bind(unit.to_string())
            .bind(num)
            .fetch_optional(self.conn())
            .await?;
        let Some(r) = row else { return Ok(None) };
        let mut rev = decode_revision(&r.get::<String, _>(0))?;
        let data = r.get::<String, _>(1);
        self.fill_marks(unit, std::slice::from_mut(&mut rev)).await?;
        Ok(Some((rev, data)))
    }

    /// One revision with its data, or NotFound naming the Unit and number.
    pub async fn must_revision(&mut self, unit: Uuid, num: i64) -> Result<(Revision, String)> {
        self.revision(unit, num)
            .await?
            .ok_or_else(|| StoreError::NotFound { kind: "Revision", key: format!("{unit}#{num}") })
    }

    /// A Unit's revisions (metadata only), oldest first.
    pub async fn revisions(&mut self, unit: Uuid) -> Result<Vec<Revision>> {
        let rows = sqlx::query("SELECT body FROM revisions WHERE unit_id = $1 ORDER BY revision_num")
            .bind(unit.to_string())
            .fetch_all(self.conn())
            .await?;
        let mut revs =
            rows.iter().map(|r| decode_revision(&r.get::<String, _>(0))).collect::<Result<Vec<_>>>()?;
        self.fill_marks(unit, &mut revs).await?;
        Ok(revs)
    }

    /// Sets each revision's Tags and ChangeOrders from the marks index (one query).
    async fn fill_marks(&mut self, unit: Uuid, revs: &mut [Revision]) -> Result<()> {
        let rows = sqlx::query(
            "SELECT kind, mark_id, revision_num FROM revision_marks WHERE unit_id = $1 ORDER BY mark_id",
        )
        .bind(unit.to_string())
        .fetch_all(self.conn())
        .await?;
        for rev in revs.iter_mut() {
            rev.Tags.clear();
            rev.ChangeOrders.clear();
        }
        for r in rows {
            let num: i64 = r.get(2);
            let Some(rev) = revs.iter_mut().find(|x| x.RevisionNum == num) else { continue };
            let Ok(id) = r.get::<String, _>(1).parse::<Uuid>() else { continue };
            match MarkKind::from_column(&r.get::<String, _>(0)) {
                Some(MarkKind::Tag) => rev.Tags.push(id),
                Some(MarkKind::ChangeOrder) => rev.ChangeOrders.push(id),
                Some(MarkKind::Release) | None => {}
            }
        }
        Ok(())
    }

    /// Marks a revision with a Tag or a ChangeOrder (idempotent).
    pub async fn mark(
        &mut self,
        kind: MarkKind,
        mark: Uuid,
        space: Uuid,
        unit: Uuid,
        num: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO revision_marks (kind, mark_id, unit_id, revision_num, space_id)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(kind.column())
        .bind(mark.to_string())
        .bind(unit.to_string())
        .bind(num)
        .bind(space.to_string())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Removes a mark from every revision of `unit`, or from every revision with `None`.
    pub async fn unmark(&mut self, kind: MarkKind, mark: Uuid, unit: Option<Uuid>) -> Result<u64> {
        let q = match unit {
            Some(u) => {
                sqlx::query("DELETE FROM revision_marks WHERE kind = $1 AND mark_id = $2 AND unit_id = $3")
                    .bind(kind.column())
                    .bind(mark.to_string())
                    .bind(u.to_string())
            }
            None => sqlx::query("DELETE FROM revision_marks WHERE kind = $1 AND mark_id = $2")
                .bind(kind.column())
                .bind(mark.to_string()),
        };
        Ok(q.execute(self.conn()).await?.rows_affected())
    }

    /// Every revision carrying a mark, across all Spaces, in one query.
    pub async fn marked(&mut self, kind: MarkKind, mark: Uuid) -> Result<Vec<Marked>> {
        let rows = sqlx::query(
            "SELECT unit_id, space_id, revision_num FROM revision_marks WHERE kind = $1 AND mark_id = $2
             ORDER BY unit_id, revision_num",
        )
        .bind(kind.column())
        .bind(mark.to_string())
        .fetch_all(self.conn())
        .await?;
        rows.iter()
            .map(|r| {
                let parse = |i: usize| {
                    r.get::<String, _>(i)
                        .parse::<Uuid>()
                        .map_err(|e| StoreError::Corrupt { kind: "Mark", reason: e.to_string() })
                };
                Ok(Marked { unit: parse(0)?, space: parse(1)?, revision_num: r.get(2) })
            })
            .collect()
    }

    /// For a Tag: per Unit, the highest-numbered revision it marks (how a Tag is read).
    pub async fn tag_heads(&mut self, tag: Uuid) -> Result<HashMap<Uuid, Marked>> {
        let mut out: HashMap<Uuid, Marked> = HashMap::new();
        for m in self.marked(MarkKind::Tag, tag).await? {
            let e = out.entry(m.unit).or_insert(m);
            if m.revision_num > e.revision_num {
                *e = m;
            }
        }
        Ok(out)
    }

    /// The Links (of any Space) that take from a Unit of `space`. One query.
    pub async fn links_into_space(&mut self, space: Uuid) -> Result<Vec<crate::model::Link>> {
        let rows = sqlx::query(
            "SELECT body FROM entities WHERE kind = 'Link' AND id IN
               (SELECT link_id FROM link_edges WHERE to_space_id = $1) ORDER BY space_id, slug",
        )
        .bind(space.to_string())
        .fetch_all(self.conn())
        .await?;
        rows.iter().map(|r| decode(&r.get::<String, _>(0))).collect()
    }

    /// The revisions of one Space's Units that carry a mark. One query.
    pub async fn marked_in_space(&mut self, kind: MarkKind, mark: Uuid, space: Uuid) -> Result<Vec<Marked>> {
        let rows = sqlx::query(
            "SELECT unit_id, revision_num FROM revision_marks
             WHERE kind = $1 AND mark_id = $2 AND space_id = $3 ORDER BY unit_id, revision_num",
        )
        .bind(kind.column())
        .bind(mark.to_string())
        .bind(space.to_string())
        .fetch_all(self.conn())
        .await?;
        rows.iter()
            .map(|r| Ok(Marked { unit: parse_uuid(&r.get::<String, _>(0))?, space, revision_num: r.get(1) }))
            .collect()
    }

    /// Per Space the tag reached: Links of `update_type` whose upstream Unit carries `tag` but
    /// whose downstream Unit does not, i.e. the hops that still have to take the change. One query.
    pub async fn pending_links(&mut self, tag: Uuid, update_type: UpdateType) -> Result<HashMap<Uuid, i64>> {
        let rows = sqlx::query(
            // Only Spaces the tag reached can be resolved, so only their edges are checked; the
            // cheap downstream test runs before the upstream one.
            "SELECT e.space_id, COUNT(*) FROM link_edges e
             WHERE e.update_type = $1
               AND e.space_id IN (SELECT space_id FROM revision_marks WHERE kind = 'Tag' AND mark_id = $2)
               AND NOT EXISTS (SELECT 1 FROM revision_marks d
                               WHERE d.kind = 'Tag' AND d.mark_id = $2 AND d.unit_id = e.from_unit_id)
               AND EXISTS (SELECT 1 FROM revision_marks u
                           WHERE u.kind = 'Tag' AND u.mark_id = $2 AND u.unit_id = e.to_unit_id)
             GROUP BY e.space_id",
        )
        .bind(update_type.as_str())
        .bind(tag.to_string())
        .fetch_all(self.conn())
        .await?;
        count_by_space(&rows)
    }

    /// Per Space a Tag reached: how many revisions it marks there, and how many of those no
    /// Release has bundled (nor a later revision of the same Unit). One query.
    pub async fn reach_and_release(&mut self, tag: Uuid) -> Result<HashMap<Uuid, (i64, i64)>> {
        let rows = sqlx::query(
            "SELECT m.space_id, COUNT(*),
                    SUM(CASE WHEN EXISTS (SELECT 1 FROM revision_marks r
                                          WHERE r.unit_id = m.unit_id AND r.kind = 'Release'
                                            AND r.revision_num >= m.revision_num)
                        THEN 0 ELSE 1 END)
             FROM revision_marks m
             WHERE m.kind = 'Tag' AND m.mark_id = $1
             GROUP BY m.space_id",
        )
        .bind(tag.to_string())
        .fetch_all(self.conn())
        .await?;
        rows.iter()
            .map(|r| Ok((parse_uuid(&r.get::<String, _>(0))?, (r.get::<i64, _>(1), r.get::<i64, _>(2)))))
            .collect()
    }

    /// Space-level edges of the Link graph: (downstream Space, upstream Space). One query.
    pub async fn space_edges(&mut self, update_type: UpdateType) -> Result<Vec<(Uuid, Uuid)>> {
        let rows =
            sqlx::query("SELECT DISTINCT space_id, to_space_id FROM link_edges WHERE update_type = $1")
                .bind(update_type.as_str())
                .fetch_all(self.conn())
                .await?;
        rows.iter()
            .map(|r| Ok((parse_uuid(&r.get::<String, _>(0))?, parse_uuid(&r.get::<String, _>(1))?)))
            .collect()
    }

    /// Stores a webhook's secret.
    pub async fn put_webhook_secret(&mut self, webhook: Uuid, secret: &str) -> Result<()> {
        sqlx::query("INSERT INTO webhook_secrets (webhook_id, secret) VALUES ($1, $2)")
            .bind(webhook.to_string())
            .bind(secret)
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// A webhook's secret.
    pub async fn webhook_secret(&mut self, webhook: Uuid) -> Result<Option<String>> {
        let row = sqlx::query("SELECT secret FROM webhook_secrets WHERE webhook_id = $1")
            .bind(webhook.to_string())
            .fetch_optional(self.conn())
            .await?;
        Ok(row.map(|r| r.get::<String, _>(0)))
    }

    /// Records a delivery ID; `false` when it was seen before (a replay).
    pub async fn accept_delivery(&mut self, webhook: Uuid, delivery: &str) -> Result<bool> {
        let r = sqlx::query(
            "INSERT INTO webhook_deliveries (webhook_id, delivery_id, received_at) VALUES ($1, $2, $3)
             ON CONFLICT DO NOTHING",
        )
        .bind(webhook.to_string())
        .bind(delivery)
        .bind(chrono::Utc::now().to_rfc3339())
        .execute(self.conn())
        .await?;
        Ok(r.rows_affected() == 1)
    }

    /// Records a token (by its hash) for a user.
    pub async fn insert_token(&mut self, token_hash: &str, user: Uuid) -> Result<()> {
        sqlx::query("INSERT INTO tokens (token_hash, user_id, created_at) VALUES ($1, $2, $3)")
            .bind(token_hash)
            .bind(user.to_string())
            .bind(chrono::Utc::now().to_rfc3339())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// The user a token hash belongs to.
    pub async fn token_user(&mut self, token_hash: &str) -> Result<Option<Uuid>> {
        let row = sqlx::query("SELECT user_id FROM tokens WHERE token_hash = $1")
            .bind(token_hash)
            .fetch_optional(self.conn())
            .await?;
        Ok(row.and_then(|r| r.get::<String, _>(0).parse().ok()))
    }

    /// How many users exist (to know whether to bootstrap an admin).
    pub async fn count<E: Entity>(&mut self) -> Result<i64> {
        let row = sqlx::query("SELECT COUNT(*) FROM entities WHERE kind = $1")
            .bind(E::KIND)
            .fetch_one(self.conn())
            .await?;
        Ok(row.get::<i64, _>(0))
    }
}
