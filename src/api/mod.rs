//! The HTTP API: JSON under `/v1/…` with ConfigHub's PascalCase field names, bearer-token
//! auth, and errors as `{error, field, value}` with the status that says what went wrong.
//! Handlers are thin: parse, authenticate, call `ops`, serialize.

mod attestations;
mod auth;
mod body;
mod changeorders;
mod error;
mod promotions;
mod releases;
mod routes;
mod webhooks;
mod workflows;

pub use error::ApiError;
pub use routes::router;

use crate::store::Store;

/// The default largest request body (Unit data included); settings `live.max_body_bytes`.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// What a handler returns.
pub(crate) type ApiResult<T = axum::response::Response> = Result<T, ApiError>;

/// Query parameters of list endpoints: `where=EXPR` and, on cross-Space lists, `space=SLUG`.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct ListQuery {
    #[serde(rename = "where")]
    pub where_: Option<String>,
    pub space: Option<String>,
}

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub jobs: crate::jobs::Jobs,
}
