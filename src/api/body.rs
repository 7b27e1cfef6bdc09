//! JSON request bodies whose errors are JSON too, naming the field at fault.

use super::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

/// A JSON body of type `T`. Malformed JSON, a wrong type or an unknown field is a 400 that
/// names the field; an oversized body is a 413.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| ApiError {
            status: if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            },
            error: format!("request body: {e}"),
            field: None,
            value: None,
            gates: None,
        })?;
        let bytes: &[u8] = if bytes.is_empty() { b"{}" } else { &bytes };
        let mut de = serde_json::Deserializer::from_slice(bytes);
        match serde_path_to_error(&mut de) {
            Ok(v) => Ok(Body(v)),
            Err((path, e)) => {
                let field = unknown_field(&e.to_string()).or(path);
                Err(ApiError::bad_request(format!("invalid request body: {e}"), field, None))
            }
        }
    }
}

/// Deserializes, returning the JSON path reached when it failed (best effort: the top-level key).
fn serde_path_to_error<T: DeserializeOwned>(
    de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'_>>,
) -> Result<T, (Option<String>, serde_json::Error)> {
    T::deserialize(&mut *de).and_then(|v| de.end().map(|_| v)).map_err(|e| {
        let msg = e.to_string();
        let field = msg.split('`').nth(1).map(str::to_string).filter(|_| msg.starts_with("missing field"));
        (field, e)
    })
}

fn unknown_field(msg: &str) -> Option<String> {
    msg.strip_prefix("unknown field `").and_then(|r| r.split('`').next()).map(str::to_string)
}
