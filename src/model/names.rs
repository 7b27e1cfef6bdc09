//! Slugs and label keys: the two kinds of names users type.

use super::InvalidField;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Labels and Annotations: string to string, ordered for stable output.
pub type Labels = BTreeMap<String, String>;

const MAX_NAME: usize = 128;
const MAX_ANNOTATION_VALUE: usize = 1024;

/// A URL-safe name unique in its container: alphanumeric at both ends, `-` and `_` inside,
/// at most 128 characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Slug(String);

impl Slug {
    /// Validates `s` as a Slug; the error names the field `Slug` and the value.
    pub fn parse(s: &str) -> Result<Slug, InvalidField> {
        Self::parse_field("Slug", s)
    }

    /// Like [`Slug::parse`] but the error names `field`.
    pub fn parse_field(field: &str, s: &str) -> Result<Slug, InvalidField> {
        let bad = |reason: &str| Err(InvalidField::new(field, s, reason));
        if s.is_empty() {
            return bad("must not be empty");
        }
        if s.chars().count() > MAX_NAME {
            return bad("must be at most 128 characters");
        }
        let chars: Vec<char> = s.chars().collect();
        let alnum = |c: &char| c.is_ascii_alphanumeric();
        if !alnum(&chars[0]) || !alnum(chars.last().expect("non-empty")) {
            return bad("must start and end with a letter or digit");
        }
        if let Some(c) = chars.iter().find(|c| !(c.is_ascii_alphanumeric() || **c == '-' || **c == '_')) {
            return bad(&format!("may contain only letters, digits, '-' and '_' (found '{c}')"));
        }
        Ok(Slug(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Slug {
    type Error = InvalidField;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Slug::parse(&s)
    }
}

impl From<Slug> for String {
    fn from(s: Slug) -> String {
        s.0
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks label (or annotation) keys: alphanumeric at both ends, `-_./` inside, at most 128.
/// `field` is `Labels` or `Annotations`; annotation values are capped at 1024 bytes.
pub fn validate_labels(field: &str, labels: &Labels) -> Result<(), InvalidField> {
    for (k, v) in labels {
        let ok_inner = k.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
        let ends = k.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && k.chars().last().is_some_and(|c| c.is_ascii_alphanumeric());
        if k.is_empty() || k.len() > MAX_NAME || !ok_inner || !ends {
            return Err(InvalidField::new(
                format!("{field}.{k}"),
                k,
                "keys must start and end with a letter or digit, contain only letters, digits and '-_./', and be at most 128 characters",
            ));
        }
        if field == "Labels" && v.len() > MAX_NAME {
            return Err(InvalidField::new(
                format!("{field}.{k}"),
                v,
                "label values are at most 128 characters",
            ));
        }
        if v.len() > MAX_ANNOTATION_VALUE {
            return Err(InvalidField::new(format!("{field}.{k}"), v, "values are at most 1024 bytes"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        for ok in ["a", "web", "my-app_2", "A1", &"x".repeat(128)] {
            assert!(Slug::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "a b", "a.b", "é", &"x".repeat(129), "_x"] {
            let e = Slug::parse(bad).unwrap_err();
            assert_eq!(e.field, "Slug");
            assert_eq!(e.value, bad);
        }
    }

    #[test]
    fn label_keys() {
        let mut l = Labels::new();
        l.insert("app.kubernetes.io/name".into(), "x".into());
        assert!(validate_labels("Labels", &l).is_ok());
        l.insert("bad key".into(), "x".into());
        let e = validate_labels("Labels", &l).unwrap_err();
        assert_eq!(e.field, "Labels.bad key");
        let mut l = Labels::new();
        l.insert("k".into(), "v".repeat(200));
        assert!(validate_labels("Labels", &l).is_err());
        assert!(validate_labels("Annotations", &l).is_ok());
    }
}
