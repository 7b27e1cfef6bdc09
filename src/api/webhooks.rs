//! Webhook routes: managing webhooks (authenticated) and receiving deliveries (signed, not
//! bearer-authenticated).

use super::auth::Auth;
use super::body::Body;
use super::error::ApiError;
use super::{ApiResult, AppState, ListQuery};
use crate::model::Webhook;
use crate::ops::{self, Delivery, DeliveryError};
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{delete, get, post};
use uuid::Uuid;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/webhooks/{webhook}", post(receive))
        .route("/v1/spaces/{space}/webhooks", get(list).post(create))
        .route("/v1/spaces/{space}/webhooks/{key}", delete(remove))
}

async fn list(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult {
    Ok(Json(ops::list_in_space::<Webhook>(&s.store, &a, Some(&space), q.where_.as_deref()).await?)
        .into_response())
}

async fn create(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::CreateWebhook>,
) -> ApiResult {
    Ok((StatusCode::CREATED, Json(ops::create_webhook(&s.store, &a, &space, req).await?)).into_response())
}

async fn remove(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, key)): Path<(String, String)>,
) -> ApiResult {
    ops::delete_in_space::<Webhook>(&s.store, &a, &space, &key).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

fn refused(reason: &str) -> ApiError {
    ApiError {
        status: StatusCode::UNAUTHORIZED,
        error: format!("delivery refused: {reason}; nothing was done"),
        field: None,
        value: None,
        gates: None,
    }
}

async fn receive(
    State(s): State<AppState>,
    Path(webhook): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    let Ok(id) = Uuid::parse_str(&webhook) else { return Err(refused("unknown webhook")) };
    let d = Delivery {
        timestamp: header(&headers, "x-changeflow-timestamp"),
        delivery_id: header(&headers, "x-changeflow-delivery")
            .or_else(|| header(&headers, "x-github-delivery")),
        signature: header(&headers, "x-changeflow-signature"),
        github_signature: header(&headers, "x-hub-signature-256"),
        body: body.to_vec(),
    };
    match ops::deliver(&s.store, id, d).await {
        Ok((v, jobs)) => {
            s.jobs.enqueue(jobs).await;
            Ok((StatusCode::ACCEPTED, Json(v)).into_response())
        }
        Err(DeliveryError::Refused(reason)) => Err(refused(reason)),
        Err(DeliveryError::Action(e)) => Err(e.into()),
    }
}
