//! A store transaction: typed reads and writes of entities, revisions and tokens.

use super::{Result, StoreError};
use crate::model::{Entity, Revision};
use sqlx::any::{Any, AnyQueryResult};
use sqlx::{Row, Transaction};
use tokio::sync::OwnedMutexGuard;
use uuid::Uuid;

/// One transaction. Dropping it without [`Tx::commit`] rolls everything back.
pub struct Tx {
    tx: Transaction<'static, Any>,
    _write_guard: Option<OwnedMutexGuard<()>>,
}

/// The container column: top-level entities (Spaces, Users) use the empty string so the
/// `(kind, space_id, slug)` uniqueness constraint covers them too.
fn container(space: Option<Uuid>) -> String {
    space.map(|s| s.to_string()).unwrap_or_default()
}

fn decode<E: Entity>(body: &str) -> Result<E> {
    serde_json::from_str(body).map_err(|e| StoreError::Corrupt {
        kind: E::KIND,
        reason: e.to_string(),
    })
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
        Ok(Tx {
            tx,
            _write_guard: guard,
        })
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
            .fetch_optional(&mut *self.tx)
            .await?;
        row.map(|r| decode(&r.get::<String, _>(0))).transpose()
    }

    /// Reads an entity by ID, or fails with NotFound.
    pub async fn must_get<E: Entity>(&mut self, id: Uuid) -> Result<E> {
        self.get(id).await?.ok_or_else(|| StoreError::NotFound {
            kind: E::KIND,
            key: id.to_string(),
        })
    }

    /// Reads an entity by Slug in its container (`None` for top-level entities).
    pub async fn find<E: Entity>(&mut self, space: Option<Uuid>, slug: &str) -> Result<Option<E>> {
        let row = sqlx::query(
            "SELECT body FROM entities WHERE kind = $1 AND space_id = $2 AND slug = $3",
        )
        .bind(E::KIND)
        .bind(container(space))
        .bind(slug)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.map(|r| decode(&r.get::<String, _>(0))).transpose()
    }

    /// Lists the entities of one container, or of every container with `None`, by Slug.
    pub async fn list<E: Entity>(&mut self, space: Option<Uuid>) -> Result<Vec<E>> {
        let rows = match space {
            Some(s) => {
                sqlx::query(
                    "SELECT body FROM entities WHERE kind = $1 AND space_id = $2 ORDER BY slug",
                )
                .bind(E::KIND)
                .bind(s.to_string())
                .fetch_all(&mut *self.tx)
                .await?
            }
            None => {
                sqlx::query("SELECT body FROM entities WHERE kind = $1 ORDER BY space_id, slug")
                    .bind(E::KIND)
                    .fetch_all(&mut *self.tx)
                    .await?
            }
        };
        rows.iter()
            .map(|r| decode(&r.get::<String, _>(0)))
            .collect()
    }

    /// Inserts a new entity; a Slug already taken in the container is `Duplicate`.
    pub async fn insert<E: Entity>(&mut self, e: &E) -> Result<()> {
        sqlx::query("INSERT INTO entities (kind, id, space_id, slug, version, body) VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(E::KIND)
            .bind(e.id().to_string())
            .bind(container(e.space_id()))
            .bind(e.slug())
            .bind(e.version())
            .bind(encode(e))
            .execute(&mut *self.tx)
            .await
            .map_err(|err| unique_as(err, || StoreError::Duplicate { kind: E::KIND, slug: e.slug().to_string() }))?;
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
        .execute(&mut *self.tx)
        .await;
        let res = res.map_err(|err| {
            unique_as(err, || StoreError::Duplicate {
                kind: E::KIND,
                slug: e.slug().to_string(),
            })
        });
        match res {
            Ok(r) if r.rows_affected() == 1 => Ok(()),
            Ok(_) => {
                e.set_version(sent);
                match self.get::<E>(e.id()).await? {
                    Some(_) => Err(StoreError::VersionConflict {
                        kind: E::KIND,
                        id: e.id().to_string(),
                        sent,
                    }),
                    None => Err(StoreError::NotFound {
                        kind: E::KIND,
                        key: e.id().to_string(),
                    }),
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
            .execute(&mut *self.tx)
            .await?;
        if E::KIND == "Unit" {
            sqlx::query("DELETE FROM revisions WHERE unit_id = $1")
                .bind(id.to_string())
                .execute(&mut *self.tx)
                .await?;
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
        .execute(&mut *self.tx)
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
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// One revision with its data.
    pub async fn revision(&mut self, unit: Uuid, num: i64) -> Result<Option<(Revision, String)>> {
        let row = sqlx::query(
            "SELECT body, data FROM revisions WHERE unit_id = $1 AND revision_num = $2",
        )
        .bind(unit.to_string())
        .bind(num)
        .fetch_optional(&mut *self.tx)
        .await?;
        match row {
            Some(r) => {
                let rev: Revision = serde_json::from_str(&r.get::<String, _>(0)).map_err(|e| {
                    StoreError::Corrupt {
                        kind: "Revision",
                        reason: e.to_string(),
                    }
                })?;
                Ok(Some((rev, r.get::<String, _>(1))))
            }
            None => Ok(None),
        }
    }

    /// One revision with its data, or NotFound naming the Unit and number.
    pub async fn must_revision(&mut self, unit: Uuid, num: i64) -> Result<(Revision, String)> {
        self.revision(unit, num)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "Revision",
                key: format!("{unit}#{num}"),
            })
    }

    /// A Unit's revisions (metadata only), oldest first.
    pub async fn revisions(&mut self, unit: Uuid) -> Result<Vec<Revision>> {
        let rows =
            sqlx::query("SELECT body FROM revisions WHERE unit_id = $1 ORDER BY revision_num")
                .bind(unit.to_string())
                .fetch_all(&mut *self.tx)
                .await?;
        rows.iter()
            .map(|r| {
                serde_json::from_str(&r.get::<String, _>(0)).map_err(|e| StoreError::Corrupt {
                    kind: "Revision",
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    /// Records a token (by its hash) for a user.
    pub async fn insert_token(&mut self, token_hash: &str, user: Uuid) -> Result<()> {
        sqlx::query("INSERT INTO tokens (token_hash, user_id, created_at) VALUES ($1, $2, $3)")
            .bind(token_hash)
            .bind(user.to_string())
            .bind(chrono::Utc::now().to_rfc3339())
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// The user a token hash belongs to.
    pub async fn token_user(&mut self, token_hash: &str) -> Result<Option<Uuid>> {
        let row = sqlx::query("SELECT user_id FROM tokens WHERE token_hash = $1")
            .bind(token_hash)
            .fetch_optional(&mut *self.tx)
            .await?;
        Ok(row.and_then(|r| r.get::<String, _>(0).parse().ok()))
    }

    /// How many users exist (to know whether to bootstrap an admin).
    pub async fn count<E: Entity>(&mut self) -> Result<i64> {
        let row = sqlx::query("SELECT COUNT(*) FROM entities WHERE kind = $1")
            .bind(E::KIND)
            .fetch_one(&mut *self.tx)
            .await?;
        Ok(row.get::<i64, _>(0))
    }
}
