//! Release routes: publish and read a Space's Releases, and record the live status a GitOps
//! operator reports. Thin handlers over `ops::releases`.

use super::auth::Auth;
use super::body::Body;
use super::{ApiResult, AppState, ListQuery};
use crate::ops;
use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, put};

/// The release routes, merged into the main router.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/spaces/{space}/releases", get(list).post(publish))
        .route("/v1/spaces/{space}/releases/{release}", get(get_one))
        .route("/v1/spaces/{space}/livestatus", put(live_status))
}

async fn publish(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::PublishRelease>,
) -> ApiResult {
    let r = ops::publish_release(&s.store, &a, &space, req).await?;
    Ok((StatusCode::CREATED, Json(r)).into_response())
}

async fn list(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult {
    Ok(Json(ops::list_releases(&s.store, &a, &space, q.where_.as_deref()).await?).into_response())
}

async fn get_one(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, release)): Path<(String, String)>,
) -> ApiResult {
    Ok(Json(ops::get_release(&s.store, &a, &space, &release).await?).into_response())
}

async fn live_status(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::LiveStatusUpdate>,
) -> ApiResult {
    Ok(Json(ops::set_live_status(&s.store, &a, &space, req).await?).into_response())
}
