//! The one error type of rendering. Each variant is a Deckhand error class (the class name is
//! the contract: `class()` returns it, the conformance corpus matches on it) and names the
//! culprit: the document (schema, name, layer), the path where it applies, and why. The two
//! classes with several distinct causes carry a typed reason with a stable code.

use std::fmt;
use thiserror::Error;

/// Identity of a raw document: `schema`, `metadata.name` and `metadata.layeringDefinition.layer`
/// (empty when the document has none).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DocRef {
    pub schema: String,
    pub name: String,
    pub layer: String,
}

impl DocRef {
    pub fn new(schema: &str, name: &str, layer: &str) -> Self {
        Self { schema: schema.to_string(), name: name.to_string(), layer: layer.to_string() }
    }
}

impl fmt::Display for DocRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let layer = if self.layer.is_empty() { "-" } else { &self.layer };
        write!(f, "[{}, layer {}] {}", self.schema, layer, self.name)
    }
}

/// Why a selected parent is not acceptable (`InvalidDocumentParent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentReason {
    /// The selector matches the labels of a document of another `schema`.
    SchemaMismatch,
    /// The selector matches a document in the same or a lower layer.
    LayerNotHigher,
}

impl ParentReason {
    /// The stable code the conformance corpus uses.
    pub fn code(self) -> &'static str {
        match self {
            Self::SchemaMismatch => "parent-schema-mismatch",
            Self::LayerNotHigher => "parent-layer-not-higher",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Self::SchemaMismatch => {
                "its parentSelector matches the labels of a document with another schema \
                 (selector labels must be unique across schemas)"
            }
            Self::LayerNotHigher => {
                "its parentSelector matches a document that is not in a strictly higher layer"
            }
        }
    }
}

/// Which replacement rule was broken (`InvalidDocumentReplacement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplacementReason {
    /// `replacement: true` but no parent was selected.
    WithoutParent,
    /// `replacement: true` but the parent has another `schema` or `metadata.name`.
    NameOrSchemaMismatch,
    /// Not a replacement, yet it has the same `schema` and `metadata.name` as its parent.
    NonReplacementSameNameAsParent,
    /// The replaced document is itself a replacement (only one level is allowed).
    ReplacementOfReplacement,
    /// Two non-replacement documents share `schema` and `metadata.name`.
    DuplicateNameWithoutReplacement,
    /// Two replacement documents select the same parent (undefined in Deckhand; refused here).
    ReplacedTwice,
}

impl ReplacementReason {
    /// The stable code the conformance corpus uses.
    pub fn code(self) -> &'static str {
        match self {
            Self::WithoutParent => "replacement-without-parent",
            Self::NameOrSchemaMismatch => "replacement-name-or-schema-mismatch",
            Self::NonReplacementSameNameAsParent => "non-replacement-same-name-as-parent",
            Self::ReplacementOfReplacement => "replacement-of-replacement",
            Self::DuplicateNameWithoutReplacement => "duplicate-name-without-replacement",
            Self::ReplacedTwice => "replaced-twice",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Self::WithoutParent => "a document with `replacement: true` must select a parent",
            Self::NameOrSchemaMismatch => {
                "a replacement must have the same schema and metadata.name as the parent it replaces"
            }
            Self::NonReplacementSameNameAsParent => {
                "it has the same schema and metadata.name as its parent; add `replacement: true` \
                 or rename it"
            }
            Self::ReplacementOfReplacement => {
                "a replacement document cannot itself be replaced (one level of replacement only)"
            }
            Self::DuplicateNameWithoutReplacement => {
                "another document has the same schema and metadata.name and neither is a replacement"
            }
            Self::ReplacedTwice => "its parent is already replaced by another document",
        }
    }
}

/// One structural problem found by pre-validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatProblem {
    pub document: DocRef,
    /// Where in the document, e.g. `metadata.layeringDefinition.actions`.
    pub path: String,
    pub reason: String,
}

impl fmt::Display for FormatProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}: {}", self.document, self.path, self.reason)
    }
}

/// A rendering failure; the variant is the Deckhand error class. Identities are boxed to keep
/// the error small on the success path.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LayeringError {
    #[error("LayeringPolicyNotFound: no deckhand/LayeringPolicy document among the input")]
    LayeringPolicyNotFound,
    #[error("InvalidDocumentLayer: {document}: layer '{}' is not in layerOrder [{}]", document.layer, layer_order.join(", "))]
    InvalidDocumentLayer { document: Box<DocRef>, layer_order: Vec<String> },
    #[error("InvalidDocumentParent: {document}: {} (matched {parent})", reason.text())]
    InvalidDocumentParent { document: Box<DocRef>, parent: Box<DocRef>, reason: ParentReason },
    #[error(
        "IndeterminateDocumentParent: {document}: {found} documents in one layer match its parentSelector"
    )]
    IndeterminateDocumentParent { document: Box<DocRef>, found: usize },
    #[error("InvalidDocumentReplacement: {document}: {}", reason.text())]
    InvalidDocumentReplacement { document: Box<DocRef>, reason: ReplacementReason },
    #[error("MissingDocumentKey: {document}: action {method} {path}: {reason}")]
    MissingDocumentKey { document: Box<DocRef>, method: String, path: String, reason: String },
    #[error("UnsupportedActionMethod: {document}: action method '{method}' is not merge, replace or delete")]
    UnsupportedActionMethod { document: Box<DocRef>, method: String },
    #[error("SubstitutionDependencyCycle: {}", cycle.iter().map(ToString::to_string).collect::<Vec<_>>().join(" -> "))]
    SubstitutionDependencyCycle { cycle: Vec<DocRef> },
    #[error(
        "SubstitutionSourceNotFound: {document}: no concrete document [{src_schema}] {src_name} to substitute from"
    )]
    SubstitutionSourceNotFound { document: Box<DocRef>, src_schema: String, src_name: String },
    #[error("SubstitutionSourceDataNotFound: {document}: src.path {path} is missing or null in {src}")]
    SubstitutionSourceDataNotFound { document: Box<DocRef>, src: Box<DocRef>, path: String },
    #[error("UnknownSubstitutionError: {document}: substituting from {src} into {path}: {reason}")]
    UnknownSubstitutionError { document: Box<DocRef>, src: Box<DocRef>, path: String, reason: String },
    #[error("InvalidDocumentFormat: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    InvalidDocumentFormat { problems: Vec<FormatProblem> },
}

impl LayeringError {
    /// The Deckhand error class name, e.g. `InvalidDocumentReplacement`.
    pub fn class(&self) -> &'static str {
        match self {
            Self::LayeringPolicyNotFound => "LayeringPolicyNotFound",
            Self::InvalidDocumentLayer { .. } => "InvalidDocumentLayer",
            Self::InvalidDocumentParent { .. } => "InvalidDocumentParent",
            Self::IndeterminateDocumentParent { .. } => "IndeterminateDocumentParent",
            Self::InvalidDocumentReplacement { .. } => "InvalidDocumentReplacement",
            Self::MissingDocumentKey { .. } => "MissingDocumentKey",
            Self::UnsupportedActionMethod { .. } => "UnsupportedActionMethod",
            Self::SubstitutionDependencyCycle { .. } => "SubstitutionDependencyCycle",
            Self::SubstitutionSourceNotFound { .. } => "SubstitutionSourceNotFound",
            Self::SubstitutionSourceDataNotFound { .. } => "SubstitutionSourceDataNotFound",
            Self::UnknownSubstitutionError { .. } => "UnknownSubstitutionError",
            Self::InvalidDocumentFormat { .. } => "InvalidDocumentFormat",
        }
    }

    /// The stable reason code of the classes with several causes (`InvalidDocumentParent`,
    /// `InvalidDocumentReplacement`).
    pub fn reason_code(&self) -> Option<&'static str> {
        match self {
            Self::InvalidDocumentParent { reason, .. } => Some(reason.code()),
            Self::InvalidDocumentReplacement { reason, .. } => Some(reason.code()),
            _ => None,
        }
    }

    /// The document at fault (the first one for a cycle or a format failure).
    pub fn document(&self) -> Option<&DocRef> {
        match self {
            Self::LayeringPolicyNotFound => None,
            Self::InvalidDocumentLayer { document, .. }
            | Self::InvalidDocumentParent { document, .. }
            | Self::IndeterminateDocumentParent { document, .. }
            | Self::InvalidDocumentReplacement { document, .. }
            | Self::MissingDocumentKey { document, .. }
            | Self::UnsupportedActionMethod { document, .. }
            | Self::SubstitutionSourceNotFound { document, .. }
            | Self::SubstitutionSourceDataNotFound { document, .. }
            | Self::UnknownSubstitutionError { document, .. } => Some(document.as_ref()),
            Self::SubstitutionDependencyCycle { cycle } => cycle.first(),
            Self::InvalidDocumentFormat { problems } => problems.first().map(|p| &p.document),
        }
    }

    /// The path the error is about (action path, `src.path`, `dest.path`, or a metadata field).
    pub fn path(&self) -> Option<&str> {
        match self {
            Self::MissingDocumentKey { path, .. }
            | Self::SubstitutionSourceDataNotFound { path, .. }
            | Self::UnknownSubstitutionError { path, .. } => Some(path),
            Self::InvalidDocumentFormat { problems } => problems.first().map(|p| p.path.as_str()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_reason_and_message_name_the_culprit() {
        let e = LayeringError::InvalidDocumentReplacement {
            document: DocRef::new("armada/Chart/v1", "web", "site").into(),
            reason: ReplacementReason::WithoutParent,
        };
        assert_eq!(e.class(), "InvalidDocumentReplacement");
        assert_eq!(e.reason_code(), Some("replacement-without-parent"));
        let msg = e.to_string();
        assert!(msg.starts_with("InvalidDocumentReplacement: [armada/Chart/v1, layer site] web"), "{msg}");
        assert_eq!(e.document().unwrap().name, "web");
        assert_eq!(LayeringError::LayeringPolicyNotFound.document(), None);
    }

    #[test]
    fn cycle_lists_every_member() {
        let e = LayeringError::SubstitutionDependencyCycle {
            cycle: vec![DocRef::new("a/B/v1", "x", "site"), DocRef::new("a/B/v1", "y", "site")],
        };
        assert!(e.to_string().contains("x -> [a/B/v1, layer site] y"));
        assert_eq!(e.path(), None);
    }
}
