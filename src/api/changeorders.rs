//! ChangeOrder routes: CRUD with State derived on read, promotion (with dry run and plan
//! digest) and undo.

use super::auth::Auth;
use super::body::Body;
use super::{ApiResult, AppState, ListQuery};
use crate::ops;
use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/changeorders", get(list_all))
        .route("/v1/spaces/{space}/changeorders", get(list).post(create))
        .route("/v1/spaces/{space}/changeorders/{co}", get(read).patch(update).delete(delete))
        .route("/v1/spaces/{space}/changeorders/{co}/promote", post(promote))
        .route("/v1/spaces/{space}/changeorders/{co}/demote", post(demote))
}

async fn list_all(State(s): State<AppState>, Auth(a): Auth, Query(q): Query<ListQuery>) -> ApiResult {
    Ok(Json(ops::list_change_orders(&s.store, &a, q.space.as_deref(), q.where_.as_deref()).await?)
        .into_response())
}

async fn list(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult {
    Ok(Json(ops::list_change_orders(&s.store, &a, Some(&space), q.where_.as_deref()).await?).into_response())
}

async fn create(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::CreateChangeOrder>,
) -> ApiResult {
    Ok((StatusCode::CREATED, Json(ops::create_change_order(&s.store, &a, &space, req).await?))
        .into_response())
}

async fn read(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, co)): Path<(String, String)>,
) -> ApiResult {
    Ok(Json(ops::get_change_order(&s.store, &a, &space, &co).await?).into_response())
}

async fn update(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, co)): Path<(String, String)>,
    Body(req): Body<ops::UpdateChangeOrder>,
) -> ApiResult {
    let out = ops::update_change_order(&s.store, &a, &space, &co, req).await?;
    // An abort stops queued tasks now rather than at their next delivery.
    let jobs = s.jobs.clone();
    tokio::spawn(async move {
        let _ = jobs.reconcile().await;
    });
    Ok(Json(out).into_response())
}

async fn delete(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, co)): Path<(String, String)>,
) -> ApiResult {
    ops::delete_change_order(&s.store, &a, &space, &co).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn promote(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, co)): Path<(String, String)>,
    Body(req): Body<ops::PromoteChangeOrder>,
) -> ApiResult {
    let hooks = ops::PromoteHooks::default();
    Ok(Json(ops::promote_change_order(&s.store, &a, &space, &co, req, &hooks).await?).into_response())
}

async fn demote(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, co)): Path<(String, String)>,
    Body(req): Body<ops::DemoteChangeOrder>,
) -> ApiResult {
    Ok(Json(ops::demote_change_order(&s.store, &a, &space, &co, req).await?).into_response())
}
