//! Unit data: a YAML document stream, parsed to JSON values for diffing and functions.

use serde_json::Value;
use sha2::{Digest, Sha256};
use thiserror::Error;

/// Unit data that is not a valid YAML document stream.
#[derive(Debug, Clone, Error, PartialEq)]
#[error("invalid YAML in unit data: {0}")]
pub struct DataError(pub String);

/// Parses a YAML document stream (documents separated by `---`). Empty documents are dropped.
/// Duplicate keys are refused.
pub fn parse_stream(yaml: &str) -> Result<Vec<Value>, DataError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).map_err(|e| DataError(e.to_string()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Renders documents back to a YAML stream, `---` between documents.
pub fn render_stream(docs: &[Value]) -> String {
    let mut out = String::new();
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        match serde_saphyr::to_string(d) {
            Ok(s) => out.push_str(&s),
            // serde_json::Value always serializes; keep a JSON line as a last resort
            Err(_) => out.push_str(&d.to_string()),
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// SHA-256 hex digest of the data as stored.
pub fn data_hash(data: &str) -> String {
    hex::encode(Sha256::digest(data.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_roundtrip() {
        let y = "a: 1\nb: [x, y]\n---\nkind: Service\nmetadata:\n  name: web\n";
        let docs = parse_stream(y).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1]["metadata"]["name"], "web");
        let again = parse_stream(&render_stream(&docs)).unwrap();
        assert_eq!(docs, again);
    }

    #[test]
    fn bad_yaml_and_duplicates() {
        assert!(parse_stream("a: [1, 2\n").is_err());
        assert!(parse_stream("a: 1\na: 2\n").is_err());
        assert_eq!(parse_stream("").unwrap().len(), 0);
    }
}
