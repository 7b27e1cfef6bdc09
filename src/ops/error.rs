//! One error type for every use case, mapped to HTTP status by the API.

use crate::model::{DataError, InvalidField, Permission};
use crate::store::StoreError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum OpError {
    /// Malformed input: the field and value at fault (HTTP 400).
    #[error("{0}")]
    Invalid(#[from] InvalidField),
    /// Well-formed input the current state refuses (HTTP 422).
    #[error("{reason}")]
    Unprocessable { field: String, value: String, reason: String },
    #[error("{kind} '{key}' not found")]
    NotFound { kind: &'static str, key: String },
    /// Slug taken, stale Version, concurrent writer (HTTP 409).
    #[error("{message}")]
    Conflict { field: String, value: String, message: String },
    #[error("user '{user}' needs {permission:?} permission on space '{space}'")]
    Forbidden { user: String, permission: Permission, space: String },
    /// The request was made against a state that has since changed (HTTP 412).
    #[error("{message}")]
    Stale { field: String, value: String, message: String },
    /// Entry or release gates that do not hold (HTTP 422); `gates` lists every failing one with
    /// its Space and reason.
    #[error("{message}")]
    GatesClosed { stage: String, message: String, gates: serde_json::Value },
    #[error("admin permission required")]
    AdminOnly,
    #[error("missing or invalid bearer token")]
    Unauthenticated,
    #[error("internal error: {0}")]
    Internal(String),
}

impl OpError {
    pub fn invalid(field: impl Into<String>, value: impl Into<String>, reason: impl Into<String>) -> Self {
        OpError::Invalid(InvalidField::new(field, value, reason))
    }

    pub fn unprocessable(
        field: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        OpError::Unprocessable { field: field.into(), value: value.into(), reason: reason.into() }
    }

    /// The field and value at fault, when there is one.
    pub fn field_value(&self) -> (Option<String>, Option<String>) {
        match self {
            OpError::Invalid(f) => (Some(f.field.clone()), Some(f.value.clone())),
            OpError::Unprocessable { field, value, .. }
            | OpError::Conflict { field, value, .. }
            | OpError::Stale { field, value, .. } => (Some(field.clone()), Some(value.clone())),
            OpError::GatesClosed { stage, .. } => (Some("Stage".into()), Some(stage.clone())),
            OpError::NotFound { kind, key } => (Some(kind.to_string()), Some(key.clone())),
            OpError::Forbidden { space, .. } => (Some("Space".into()), Some(space.clone())),
            _ => (None, None),
        }
    }
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { kind, key } => OpError::NotFound { kind, key },
            StoreError::Duplicate { ref slug, .. } => {
                OpError::Conflict { field: "Slug".into(), value: slug.clone(), message: e.to_string() }
            }
            StoreError::VersionConflict { sent, .. } => {
                OpError::Conflict { field: "Version".into(), value: sent.to_string(), message: e.to_string() }
            }
            StoreError::Busy { .. } => {
                OpError::Conflict { field: "Version".into(), value: String::new(), message: e.to_string() }
            }
            other => OpError::Internal(other.to_string()),
        }
    }
}

impl From<DataError> for OpError {
    fn from(e: DataError) -> Self {
        OpError::invalid("Data", "", format!("not valid YAML: {}", e.0))
    }
}

impl From<crate::query::QueryError> for OpError {
    fn from(e: crate::query::QueryError) -> Self {
        OpError::invalid("where", e.token.clone(), e.to_string())
    }
}
