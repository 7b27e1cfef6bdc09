//! Mapping use-case errors to HTTP: status plus `{error, field, value}`.

use crate::ops::OpError;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error on its way to the client.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub error: String,
    pub field: Option<String>,
    pub value: Option<String>,
    /// For refusals by gates: every failing gate with its Space and reason.
    pub gates: Option<Box<serde_json::Value>>,
}

impl ApiError {
    pub fn bad_request(error: impl Into<String>, field: Option<String>, value: Option<String>) -> Self {
        ApiError { status: StatusCode::BAD_REQUEST, error: error.into(), field, value, gates: None }
    }
}

impl From<OpError> for ApiError {
    fn from(e: OpError) -> Self {
        let status = match &e {
            OpError::Invalid(_) => StatusCode::BAD_REQUEST,
            OpError::Unprocessable { .. } | OpError::GatesClosed { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            OpError::NotFound { .. } => StatusCode::NOT_FOUND,
            OpError::Conflict { .. } => StatusCode::CONFLICT,
            OpError::Stale { .. } => StatusCode::PRECONDITION_FAILED,
            OpError::Forbidden { .. } | OpError::AdminOnly => StatusCode::FORBIDDEN,
            OpError::Unauthenticated => StatusCode::UNAUTHORIZED,
            OpError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = %e, "internal error");
        }
        let (field, value) = e.field_value();
        let gates = match &e {
            OpError::GatesClosed { gates, .. } => Some(Box::new(gates.clone())),
            _ => None,
        };
        ApiError { status, error: e.to_string(), field, value, gates }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": self.error, "field": self.field, "value": self.value});
        if let Some(g) = self.gates {
            body["gates"] = *g;
        }
        let mut resp = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert("www-authenticate", "Bearer".parse().expect("static header"));
        }
        resp
    }
}
