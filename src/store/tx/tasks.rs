//! Promotion tasks: one row per (Promotion, Space), with the columns the wave driver counts and
//! the reconciler scans kept outside the JSON body.

use super::{Tx, encode};
use crate::model::{PromotionTask, TaskState};
use crate::store::{Result, StoreError};
use chrono::{DateTime, TimeZone, Utc};
use sqlx::Row;
use std::collections::HashMap;
use uuid::Uuid;

fn millis(t: Option<DateTime<Utc>>) -> i64 {
    t.map(|t| t.timestamp_millis()).unwrap_or(0)
}

fn from_millis(ms: i64) -> Option<DateTime<Utc>> {
    if ms == 0 { None } else { Utc.timestamp_millis_opt(ms).single() }
}

fn decode_task(row: &sqlx::any::AnyRow) -> Result<PromotionTask> {
    let mut t: PromotionTask = serde_json::from_str(&row.get::<String, _>(0))
        .map_err(|e| StoreError::Corrupt { kind: "PromotionTask", reason: e.to_string() })?;
    // The lease is renewed outside the body (no Version bump), so the column is the truth.
    t.LeaseUntil = from_millis(row.get::<i64, _>(1));
    Ok(t)
}

impl Tx {
    /// Inserts a task; a second task for the same (Promotion, Space) is `Duplicate`.
    pub async fn insert_task(&mut self, t: &PromotionTask) -> Result<()> {
        sqlx::query(
            "INSERT INTO promotion_tasks (task_id, promotion_id, wave, stage, space_id, state, due_at, lease_until, worker, version, body)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(t.TaskID.to_string())
        .bind(t.PromotionID.to_string())
        .bind(t.Wave)
        .bind(&t.Stage)
        .bind(t.SpaceID.to_string())
        .bind(t.State.as_str())
        .bind(millis(t.DueAt))
        .bind(millis(t.LeaseUntil))
        .bind(&t.Worker)
        .bind(t.Version)
        .bind(encode(t))
        .execute(self.conn())
        .await
        .map_err(|e| {
            super::unique_as(e, || StoreError::Duplicate { kind: "PromotionTask", slug: t.Space.clone() })
        })?;
        Ok(())
    }

    /// Writes `t` if its stored Version is still `t`'s; bumps Version and UpdatedAt.
    pub async fn update_task(&mut self, t: &mut PromotionTask) -> Result<()> {
        let sent = t.Version;
        t.Version += 1;
        t.UpdatedAt = Utc::now();
        let r = sqlx::query(
            "UPDATE promotion_tasks SET state = $1, due_at = $2, lease_until = $3, worker = $4, version = $5, body = $6
             WHERE task_id = $7 AND version = $8",
        )
        .bind(t.State.as_str())
        .bind(millis(t.DueAt))
        .bind(millis(t.LeaseUntil))
        .bind(&t.Worker)
        .bind(t.Version)
        .bind(encode(t))
        .bind(t.TaskID.to_string())
        .bind(sent)
        .execute(self.conn())
        .await?;
        if r.rows_affected() == 1 {
            Ok(())
        } else {
            t.Version = sent;
            Err(StoreError::VersionConflict { kind: "PromotionTask", id: t.TaskID.to_string(), sent })
        }
    }

    /// Extends the lease of a task `worker` still holds; false when it no longer does.
    pub async fn renew_lease(&mut self, task: Uuid, worker: &str, until: DateTime<Utc>) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE promotion_tasks SET lease_until = $1 WHERE task_id = $2 AND state = 'Running' AND worker = $3",
        )
        .bind(until.timestamp_millis())
        .bind(task.to_string())
        .bind(worker)
        .execute(self.conn())
        .await?;
        Ok(r.rows_affected() == 1)
    }

    pub async fn get_task(&mut self, id: Uuid) -> Result<Option<PromotionTask>> {
        let row = sqlx::query("SELECT body, lease_until FROM promotion_tasks WHERE task_id = $1")
            .bind(id.to_string())
            .fetch_optional(self.conn())
            .await?;
        row.as_ref().map(decode_task).transpose()
    }

    /// Every task of a Promotion, by wave then Space.
    pub async fn tasks(&mut self, promotion: Uuid) -> Result<Vec<PromotionTask>> {
        let rows = sqlx::query(
            "SELECT body, lease_until FROM promotion_tasks WHERE promotion_id = $1 ORDER BY wave, task_id",
        )
        .bind(promotion.to_string())
        .fetch_all(self.conn())
        .await?;
        let mut out: Vec<PromotionTask> = rows.iter().map(decode_task).collect::<Result<_>>()?;
        out.sort_by(|a, b| (a.Wave, &a.Space).cmp(&(b.Wave, &b.Space)));
        Ok(out)
    }

    /// How many tasks of a wave are in each state.
    pub async fn task_counts(&mut self, promotion: Uuid, wave: i64) -> Result<HashMap<TaskState, usize>> {
        let rows = sqlx::query(
            "SELECT state, COUNT(*) FROM promotion_tasks WHERE promotion_id = $1 AND wave = $2 GROUP BY state",
        )
        .bind(promotion.to_string())
        .bind(wave)
        .fetch_all(self.conn())
        .await?;
        let mut out = HashMap::new();
        for r in rows {
            let state: TaskState = r
                .get::<String, _>(0)
                .parse()
                .map_err(|reason| StoreError::Corrupt { kind: "PromotionTask", reason })?;
            out.insert(state, r.get::<i64, _>(1) as usize);
        }
        Ok(out)
    }

    /// Per wave: its Stage and how many of its tasks are in each state.
    pub async fn wave_counts(&mut self, promotion: Uuid) -> Result<Vec<(i64, String, TaskState, usize)>> {
        let rows = sqlx::query(
            "SELECT wave, stage, state, COUNT(*) FROM promotion_tasks WHERE promotion_id = $1
             GROUP BY wave, stage, state ORDER BY wave",
        )
        .bind(promotion.to_string())
        .fetch_all(self.conn())
        .await?;
        rows.iter()
            .map(|r| {
                let state: TaskState = r
                    .get::<String, _>(2)
                    .parse()
                    .map_err(|reason| StoreError::Corrupt { kind: "PromotionTask", reason })?;
                Ok((r.get::<i64, _>(0), r.get::<String, _>(1), state, r.get::<i64, _>(3) as usize))
            })
            .collect()
    }

    /// Up to `limit` tasks of a wave in `state`, oldest first.
    pub async fn tasks_in_state(
        &mut self,
        promotion: Uuid,
        wave: i64,
        state: TaskState,
        limit: usize,
    ) -> Result<Vec<PromotionTask>> {
        let rows = sqlx::query(
            "SELECT body, lease_until FROM promotion_tasks
             WHERE promotion_id = $1 AND wave = $2 AND state = $3 ORDER BY due_at, task_id LIMIT $4",
        )
        .bind(promotion.to_string())
        .bind(wave)
        .bind(state.as_str())
        .bind(limit as i64)
        .fetch_all(self.conn())
        .await?;
        rows.iter().map(decode_task).collect()
    }

    /// Tasks the reconciler must look at: Queued or Blocked ones due before `due_before`, and
    /// Running ones whose lease ended before `now`.
    pub async fn overdue_tasks(
        &mut self,
        due_before: DateTime<Utc>,
        now: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<PromotionTask>> {
        let rows = sqlx::query(
            "SELECT body, lease_until FROM promotion_tasks
             WHERE (state IN ('Queued', 'Blocked') AND due_at < $1) OR (state = 'Running' AND lease_until < $2)
             LIMIT $3",
        )
        .bind(due_before.timestamp_millis())
        .bind(now.timestamp_millis())
        .bind(limit as i64)
        .fetch_all(self.conn())
        .await?;
        rows.iter().map(decode_task).collect()
    }
}
