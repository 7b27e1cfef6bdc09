//! The HTTP API: JSON under `/v1/…` with ConfigHub's PascalCase field names, bearer-token
//! auth, and errors as `{error, field, value}` with the status that says what went wrong.
//! Handlers are thin: parse, authenticate, call `ops`, serialize.

mod attestations;
mod auth;
mod body;
mod changeorders;
mod error;
mod releases;
mod routes;
mod workflows;

pub use error::ApiError;
pub use routes::router;

use crate::store::Store;

/// Largest request body accepted (Unit data included).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
}
