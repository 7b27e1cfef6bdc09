//! Schedules: a cron expression in a time zone that promotes a ChangeOrder (or runs an Invoke
//! ChangeOrder) when it fires. Each tick creates at most one Promotion, however many servers
//! see it: the Promotion's Slug is derived from the schedule and the tick, and Slugs are unique.

use super::promotions::{JobRef, PromotionRequest, request_promotion};
use super::{Actor, OpError, Result, resolve};
use crate::jobs::schedule::Cron;
use crate::model::{ChangeOrder, Permission, Schedule, ScheduleAction, Slug, Space, User};
use crate::store::Store;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

/// The body of a schedule creation.
#[allow(non_snake_case)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSchedule {
    pub Slug: String,
    pub Cron: String,
    #[serde(default = "utc")]
    pub TimeZone: String,
    /// `promote` (the only action: an Invoke ChangeOrder promoted runs its Invocation).
    #[serde(default = "promote")]
    pub Action: String,
    /// `space/slug` of the ChangeOrder, or its slug in the schedule's Space.
    pub ChangeOrder: String,
    #[serde(default)]
    pub TargetStage: Option<String>,
}

fn utc() -> String {
    "UTC".into()
}

fn promote() -> String {
    "promote".into()
}

fn cron_of(s: &Schedule) -> Result<Cron> {
    Cron::parse(&s.Cron, &s.TimeZone).map_err(|(f, m)| OpError::invalid(f, "", m))
}

/// Creates a schedule in `space` (Edit there); the expression and time zone are checked now.
pub async fn create_schedule(
    store: &Store,
    actor: &Actor,
    space: &str,
    req: CreateSchedule,
) -> Result<Schedule> {
    let slug = Slug::parse(&req.Slug)?;
    let cron = Cron::parse(&req.Cron, &req.TimeZone).map_err(|(field, m)| {
        OpError::invalid(field, if field == "Cron" { req.Cron.as_str() } else { req.TimeZone.as_str() }, m)
    })?;
    if req.Action != "promote" {
        return Err(OpError::invalid("Action", req.Action.as_str(), "expected promote"));
    }
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Edit)?;
    let (_, co) = resolve::qualified::<ChangeOrder>(&mut tx, &req.ChangeOrder, Some(&sp)).await?;
    if let Some(stage) = &req.TargetStage {
        let known = match &co.ChangeWorkflow {
            Some(def) => {
                crate::gates::compile(crate::gates::from_json(def.clone())?)?.stage_index(stage).is_some()
            }
            None => false,
        };
        if !known {
            return Err(OpError::invalid(
                "TargetStage",
                stage.as_str(),
                format!("change order '{}' has no Stage by that name", co.Slug),
            ));
        }
    }
    let now = Utc::now();
    let s = Schedule {
        ScheduleID: Uuid::new_v4(),
        SpaceID: sp.SpaceID,
        Slug: slug,
        Cron: req.Cron.trim().to_string(),
        TimeZone: req.TimeZone.clone(),
        Action: ScheduleAction::Promote {
            ChangeOrderID: co.ChangeOrderID,
            TargetStage: req.TargetStage.clone(),
        },
        OwnerID: actor.id(),
        LastFiredAt: None,
        NextFireAt: cron.next_after(now),
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    tx.insert(&s).await?;
    tx.commit().await?;
    Ok(s)
}

/// Schedules in one Space or every Space the caller may see.
pub async fn list_schedules(store: &Store, actor: &Actor, space: Option<&str>) -> Result<Vec<Schedule>> {
    let mut tx = store.read().await?;
    let container = resolve::list_scope(&mut tx, actor, space).await?;
    Ok(tx.list::<Schedule>(container).await?.into_iter().filter(|s| actor.can_view(s.SpaceID)).collect())
}

pub async fn delete_schedule(store: &Store, actor: &Actor, space: &str, key: &str) -> Result<()> {
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Edit)?;
    let s = resolve::in_space::<Schedule>(&mut tx, &sp, key).await?;
    tx.delete::<Schedule>(s.ScheduleID).await?;
    tx.commit().await?;
    Ok(())
}

/// Fires every schedule with a tick due at `now`: one Promotion per tick, named
/// `<schedule>-<unix seconds of the tick>`. A tick another server already fired is recorded
/// and skipped. Returns the jobs to queue.
pub async fn fire_due(store: &Store, now: DateTime<Utc>) -> Result<Vec<JobRef>> {
    let schedules = store.read().await?.list::<Schedule>(None).await?;
    let mut jobs = vec![];
    for s in schedules {
        let Ok(cron) = cron_of(&s) else { continue };
        let Some(tick) = cron.due(s.LastFiredAt.unwrap_or(s.CreatedAt), now) else { continue };
        let ScheduleAction::Promote { ChangeOrderID, TargetStage } = &s.Action;
        let (owner, space, co) = {
            let mut tx = store.read().await?;
            (
                tx.get::<User>(s.OwnerID).await?,
                tx.get::<Space>(s.SpaceID).await?,
                tx.get::<ChangeOrder>(*ChangeOrderID).await?,
            )
        };
        let slug = Slug::parse(&format!("{}-{}", s.Slug, tick.timestamp()))?;
        let outcome = match (owner, space, co) {
            (Some(user), Some(_), Some(co)) => {
                let base = store.read().await?.must_get::<Space>(co.SpaceID).await?;
                let req = PromotionRequest { TargetStage: TargetStage.clone(), ..Default::default() };
                request_promotion(
                    store,
                    &Actor { user },
                    base.SpaceID.to_string().as_str(),
                    co.ChangeOrderID.to_string().as_str(),
                    req,
                    &format!("schedule:{}", s.Slug),
                    Some(slug),
                )
                .await
                .map(|(_, j)| j)
            }
            _ => Err(OpError::NotFound { kind: "ChangeOrder", key: ChangeOrderID.to_string() }),
        };
        match outcome {
            Ok(j) => {
                tracing::info!(schedule = %s.Slug, %tick, "schedule fired");
                jobs.extend(j);
            }
            // Another server fired this tick first.
            Err(OpError::Conflict { .. }) => {}
            Err(e) => {
                tracing::warn!(schedule = %s.Slug, %tick, error = %e, "schedule could not start a promotion")
            }
        }
        let mut tx = store.write().await?;
        if let Some(mut cur) = tx.get::<Schedule>(s.ScheduleID).await?
            && cur.LastFiredAt.is_none_or(|l| l < tick)
        {
            cur.LastFiredAt = Some(tick);
            cur.NextFireAt = cron.next_after(now);
            if tx.update(&mut cur).await.is_ok() {
                tx.commit().await?;
            }
        }
    }
    Ok(jobs)
}
