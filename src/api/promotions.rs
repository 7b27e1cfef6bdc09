//! Promotion routes (requests go through the queue: the response is the Promotion, at once),
//! schedules, and the Prometheus metrics endpoint.

use super::auth::Auth;
use super::body::Body;
use super::{ApiResult, AppState};
use crate::ops;
use crate::ops::promotions::{self as promo, PromotionRequest};
use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{delete, get, post};
use serde::Deserialize;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/spaces/{space}/changeorders/{co}/promotions", post(request))
        .route("/v1/promotions", get(list))
        .route("/v1/promotions/{id}", get(read))
        .route("/v1/promotions/{id}/cancel", post(cancel))
        .route("/v1/schedules", get(list_schedules_all))
        .route("/v1/spaces/{space}/schedules", get(list_schedules).post(create_schedule))
        .route("/v1/spaces/{space}/schedules/{schedule}", delete(delete_schedule))
        .route("/metrics", get(metrics))
}

async fn request(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, co)): Path<(String, String)>,
    Body(req): Body<PromotionRequest>,
) -> ApiResult {
    let (p, jobs) = promo::request_promotion(&s.store, &a, &space, &co, req, "api", None).await?;
    s.jobs.enqueue(jobs).await;
    s.jobs.analyze_soon();
    let view = promo::get_promotion(&s.store, &a, &p.PromotionID.to_string(), true).await?;
    Ok((StatusCode::ACCEPTED, Json(view)).into_response())
}

#[derive(Debug, Deserialize)]
struct PromotionQuery {
    space: Option<String>,
    change_order: Option<String>,
}

async fn list(State(s): State<AppState>, Auth(a): Auth, Query(q): Query<PromotionQuery>) -> ApiResult {
    Ok(Json(promo::list_promotions(&s.store, &a, q.space.as_deref(), q.change_order.as_deref()).await?)
        .into_response())
}

#[derive(Debug, Deserialize)]
struct ReadQuery {
    /// `false`: counts per state and per wave only (what a progress display polls).
    tasks: Option<bool>,
}

async fn read(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(id): Path<String>,
    Query(q): Query<ReadQuery>,
) -> ApiResult {
    Ok(Json(promo::get_promotion(&s.store, &a, &id, q.tasks.unwrap_or(true)).await?).into_response())
}

#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    #[serde(default)]
    Reason: Option<String>,
}

async fn cancel(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(id): Path<String>,
    Body(req): Body<CancelBody>,
) -> ApiResult {
    Ok(Json(promo::cancel_promotion(&s.store, &a, &id, req.Reason).await?).into_response())
}

#[derive(Debug, Deserialize)]
struct SpaceQuery {
    space: Option<String>,
}

async fn list_schedules_all(
    State(s): State<AppState>,
    Auth(a): Auth,
    Query(q): Query<SpaceQuery>,
) -> ApiResult {
    Ok(Json(ops::schedules::list_schedules(&s.store, &a, q.space.as_deref()).await?).into_response())
}

async fn list_schedules(State(s): State<AppState>, Auth(a): Auth, Path(space): Path<String>) -> ApiResult {
    Ok(Json(ops::schedules::list_schedules(&s.store, &a, Some(&space)).await?).into_response())
}

async fn create_schedule(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::schedules::CreateSchedule>,
) -> ApiResult {
    Ok((StatusCode::CREATED, Json(ops::schedules::create_schedule(&s.store, &a, &space, req).await?))
        .into_response())
}

async fn delete_schedule(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, schedule)): Path<(String, String)>,
) -> ApiResult {
    ops::schedules::delete_schedule(&s.store, &a, &space, &schedule).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Prometheus text exposition; the queue depth is read fresh for each scrape.
async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    if let Ok(depth) = s.jobs.queue.depth().await {
        metrics::gauge!(crate::telemetry::QUEUE_DEPTH).set(depth as f64);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], crate::telemetry::render())
}
