//! A borrowed view of one input document: the metadata fields rendering reads (identity,
//! layer, flags, labels, `parentSelector`, actions, substitutions), read the tolerant way
//! Deckhand reads them when validation is off: a missing field is empty, `abstract` and
//! `replacement` count only when literally `true`. A field of an impossible type (a list of
//! labels, a mapping of actions) is an `InvalidDocumentFormat` problem. Control documents are
//! those whose `metadata.schema` starts with `metadata/Control`.

use super::error::{DocRef, FormatProblem};
use serde_json::{Map, Value};

/// What rendering needs to know about one document, borrowed from the input.
#[derive(Debug, Clone)]
pub(crate) struct DocView<'a> {
    pub schema: &'a str,
    pub name: &'a str,
    /// Empty when the document has no layer.
    pub layer: &'a str,
    pub is_abstract: bool,
    pub is_control: bool,
    pub is_replacement: bool,
    pub labels: Option<&'a Map<String, Value>>,
    /// `None` when absent or empty.
    pub selector: Option<&'a Map<String, Value>>,
    pub actions: &'a [Value],
    pub substitutions: &'a [Value],
}

const EMPTY: &[Value] = &[];

fn str_at(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or("")
}

impl<'a> DocView<'a> {
    /// Reads the metadata of `doc`.
    pub(crate) fn of(doc: &'a Value) -> Result<Self, FormatProblem> {
        let problem = |r: DocRef, path: &str, reason: &str| FormatProblem {
            document: r,
            path: path.to_string(),
            reason: reason.to_string(),
        };
        let Value::Object(top) = doc else {
            return Err(problem(DocRef::default(), ".", "a document must be a mapping"));
        };
        let meta = top.get("metadata").and_then(Value::as_object);
        let ld = meta.and_then(|m| m.get("layeringDefinition")).and_then(Value::as_object);
        let view = DocView {
            schema: str_at(top.get("schema")),
            name: str_at(meta.and_then(|m| m.get("name"))),
            layer: str_at(ld.and_then(|l| l.get("layer"))),
            is_abstract: ld.and_then(|l| l.get("abstract")) == Some(&Value::Bool(true)),
            is_control: str_at(meta.and_then(|m| m.get("schema"))).starts_with("metadata/Control"),
            is_replacement: meta.and_then(|m| m.get("replacement")) == Some(&Value::Bool(true)),
            labels: None,
            selector: None,
            actions: EMPTY,
            substitutions: EMPTY,
        };
        let r = view.doc_ref();
        let mapping = |v: Option<&'a Value>, path: &str| match v {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(_) => Err(problem(r.clone(), path, "must be a mapping")),
        };
        let list = |v: Option<&'a Value>, path: &str| match v {
            None | Some(Value::Null) => Ok(EMPTY),
            Some(Value::Array(a)) => Ok(a.as_slice()),
            Some(_) => Err(problem(r.clone(), path, "must be a list")),
        };
        let labels = mapping(meta.and_then(|m| m.get("labels")), "metadata.labels")?;
        let selector =
            mapping(ld.and_then(|l| l.get("parentSelector")), "metadata.layeringDefinition.parentSelector")?
                .filter(|m| !m.is_empty());
        let actions = list(ld.and_then(|l| l.get("actions")), "metadata.layeringDefinition.actions")?;
        let substitutions = list(meta.and_then(|m| m.get("substitutions")), "metadata.substitutions")?;
        Ok(DocView { labels, selector, actions, substitutions, ..view })
    }

    /// The raw identity (schema, layer, name) as an owned reference for errors.
    pub(crate) fn doc_ref(&self) -> DocRef {
        DocRef::new(self.schema, self.name, self.layer)
    }

    /// True when every pair of `selector` is among this document's labels.
    pub(crate) fn labels_satisfy(&self, selector: &Map<String, Value>) -> bool {
        let Some(labels) = self.labels else { return false };
        selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_tolerant_way() {
        let d = json!({
            "schema": "armada/Chart/v1",
            "metadata": {
                "schema": "metadata/Document/v1", "name": "web", "replacement": "true",
                "labels": {"a": "1"},
                "layeringDefinition": {"layer": "site", "abstract": true, "parentSelector": {}}
            },
            "data": {}
        });
        let v = DocView::of(&d).unwrap();
        assert_eq!((v.schema, v.name, v.layer), ("armada/Chart/v1", "web", "site"));
        assert!(v.is_abstract && !v.is_replacement && !v.is_control);
        assert!(v.selector.is_none(), "an empty selector is no selector");
        assert!(v.actions.is_empty() && v.substitutions.is_empty());
        assert!(v.labels_satisfy(json!({"a": "1"}).as_object().unwrap()));
        assert!(!v.labels_satisfy(json!({"a": 1}).as_object().unwrap()), "types are compared");
    }

    #[test]
    fn impossible_types_are_format_problems() {
        let d = json!({"schema": "a/B/v1", "metadata": {"name": "x", "labels": ["a"]}, "data": 1});
        let p = DocView::of(&d).unwrap_err();
        assert_eq!(p.path, "metadata.labels");
        assert_eq!(p.document.name, "x");
        assert!(DocView::of(&json!("just text")).is_err());
        let c =
            json!({"schema": "deckhand/LayeringPolicy/v1", "metadata": {"schema": "metadata/Control/v1"}});
        assert!(DocView::of(&c).unwrap().is_control);
    }
}
