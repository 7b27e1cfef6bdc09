//! Attestation routes.

use super::auth::Auth;
use super::body::Body;
use super::{ApiResult, AppState};
use crate::ops;
use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde::Deserialize;

#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    change_order: Option<String>,
}

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/spaces/{space}/attestations", get(list).post(create))
        .route("/v1/spaces/{space}/attestations/{attestation}/revoke", post(revoke))
}

async fn list(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult {
    Ok(Json(ops::list_attestations(&s.store, &a, &space, q.change_order.as_deref()).await?).into_response())
}

async fn create(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::CreateAttestation>,
) -> ApiResult {
    Ok((StatusCode::CREATED, Json(ops::create_attestation(&s.store, &a, &space, req).await?)).into_response())
}

async fn revoke(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, attestation)): Path<(String, String)>,
) -> ApiResult {
    Ok((StatusCode::CREATED, Json(ops::revoke_attestation(&s.store, &a, &space, &attestation).await?))
        .into_response())
}
