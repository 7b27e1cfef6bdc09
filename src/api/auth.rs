//! Bearer-token authentication as an extractor: a handler that takes [`Auth`] is authenticated.

use super::{AppState, error::ApiError};
use crate::ops::{self, Actor, OpError};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;

/// The authenticated caller.
pub struct Auth(pub Actor);

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = parts.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
        let token = header.strip_prefix("Bearer ").map(str::trim).filter(|t| !t.is_empty());
        let Some(token) = token else {
            return Err(OpError::Unauthenticated.into());
        };
        Ok(Auth(ops::authenticate(&state.store, token).await?))
    }
}
