//! The domain model: Spaces, Units, Revisions, Tags, Links, Filters, Invocations, Targets and
//! Users, with the field names ConfigHub uses in its JSON (PascalCase).
//!
//! Everything here is plain data plus validating constructors. No I/O: the store persists these
//! values, the API serializes them, the planners compute new ones from old ones.

mod attestation;
mod changeorder;
mod data;
mod entities;
mod names;
mod promotion;
mod release;
mod webhook;

pub use attestation::*;
pub use changeorder::*;
pub use data::{DataError, data_hash, parse_stream, render_stream};
pub use entities::*;
pub use names::{Labels, Slug, validate_labels};
pub use promotion::*;
pub use release::*;
pub use webhook::*;

use thiserror::Error;

/// A value that failed validation, naming the field and the value at fault.
#[derive(Debug, Clone, Error, PartialEq)]
#[error("invalid {field}{}: {reason}", if value.is_empty() { String::new() } else { format!(" '{value}'") })]
pub struct InvalidField {
    pub field: String,
    pub value: String,
    pub reason: String,
}

impl InvalidField {
    pub fn new(field: impl Into<String>, value: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { field: field.into(), value: value.into(), reason: reason.into() }
    }
}
