//! ChangeWorkflow routes: the definition is sent as YAML text and checked when written.

use super::auth::Auth;
use super::body::Body;
use super::{ApiResult, AppState, ListQuery};
use crate::model::ChangeWorkflow;
use crate::ops;
use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/changeworkflows", get(list_all))
        .route("/v1/spaces/{space}/changeworkflows", get(list).post(create))
        .route("/v1/spaces/{space}/changeworkflows/{wf}", get(read).patch(update).delete(delete))
}

async fn list_all(State(s): State<AppState>, Auth(a): Auth, Query(q): Query<ListQuery>) -> ApiResult {
    let v =
        ops::list_in_space::<ChangeWorkflow>(&s.store, &a, q.space.as_deref(), q.where_.as_deref()).await?;
    Ok(Json(v).into_response())
}

async fn list(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult {
    let v = ops::list_in_space::<ChangeWorkflow>(&s.store, &a, Some(&space), q.where_.as_deref()).await?;
    Ok(Json(v).into_response())
}

async fn create(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::WriteChangeWorkflow>,
) -> ApiResult {
    Ok((StatusCode::CREATED, Json(ops::create_change_workflow(&s.store, &a, &space, req).await?))
        .into_response())
}

async fn read(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, wf)): Path<(String, String)>,
) -> ApiResult {
    Ok(Json(ops::get_in_space::<ChangeWorkflow>(&s.store, &a, &space, &wf).await?).into_response())
}

async fn update(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, wf)): Path<(String, String)>,
    Body(req): Body<ops::WriteChangeWorkflow>,
) -> ApiResult {
    Ok(Json(ops::update_change_workflow(&s.store, &a, &space, &wf, req).await?).into_response())
}

async fn delete(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, wf)): Path<(String, String)>,
) -> ApiResult {
    ops::delete_in_space::<ChangeWorkflow>(&s.store, &a, &space, &wf).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
