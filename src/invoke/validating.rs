//! The validating built-ins (`vet-*`). They never change the documents; they return a
//! [`ValidationResult`] whose failed attributes name the resource (`Kind/name` or `#index`)
//! and the dotted path of each offending value. Documents that are not objects are skipped.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use super::registry::{BoundCall, Handler, param, signature};
use super::{
    DataType, FailedAttribute, FunctionOutcome, FunctionSignature, InvokeError, ValidationResult, join_path,
    resource_id,
};

/// ConfigHub's placeholder string and number: values a user must replace before release.
pub const PLACEHOLDER_STRING: &str = "confighubplaceholder";
pub const PLACEHOLDER_NUMBER: i64 = 999_999_999;

pub(super) fn builtins() -> Vec<(FunctionSignature, Handler)> {
    vec![
        (
            signature(
                "vet-cel",
                "Checks that a CEL expression is true for every resource, bound as r (e.g. r.kind != 'Deployment' || r.spec.replicas >= 2). A false result, a non-boolean result or an evaluation error (such as a missing field: guard with has()) fails that resource.",
                vec![param(
                    "expression",
                    DataType::String,
                    true,
                    "CEL expression over the resource r that must evaluate to true, e.g. has(r.metadata.labels.team)",
                )],
                false,
            ),
            vet_cel,
        ),
        (
            signature(
                "vet-placeholders",
                "Fails when any value is still a placeholder: the string confighubplaceholder or the number 999999999. Each one is listed with its resource and path.",
                vec![],
                false,
            ),
            vet_placeholders,
        ),
    ]
}

fn result(docs: &[Value], failed: Vec<FailedAttribute>, details: Vec<String>) -> FunctionOutcome {
    FunctionOutcome {
        documents: docs.to_vec(),
        changed: false,
        validation: Some(ValidationResult { passed: failed.is_empty(), details, failed_attributes: failed }),
    }
}

/// Serializes a JSON value for CEL, writing every integer that fits as a signed `int`, so that
/// `r.spec.replicas >= 2` and `r.spec.replicas + 1` work (serde_json would hand non-negative
/// integers over as CEL `uint`).
pub struct CelJson<'a>(pub &'a Value);

impl Serialize for CelJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => s.serialize_i64(i),
                (None, Some(u)) => s.serialize_u64(u),
                _ => s.serialize_f64(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(text) => s.serialize_str(text),
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&CelJson(item))?;
                }
                seq.end()
            }
            Value::Object(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, &CelJson(v))?;
                }
                map.end()
            }
        }
    }
}

/// A CEL result as JSON, for a failed attribute's value.
fn cel_to_json(value: &cel::Value) -> Value {
    match value {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(*b),
        cel::Value::Int(i) => Value::from(*i),
        cel::Value::UInt(u) => Value::from(*u),
        cel::Value::Float(f) => Value::from(*f),
        cel::Value::String(s) => Value::from(s.as_str()),
        cel::Value::List(items) => Value::Array(items.iter().map(cel_to_json).collect()),
        cel::Value::Map(map) => {
            // Sorted, so that results are deterministic.
            let sorted: std::collections::BTreeMap<String, Value> =
                map.map.iter().map(|(k, v)| (k.to_string(), cel_to_json(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        other => Value::from(format!("{other:?}")),
    }
}

fn vet_cel(docs: &[Value], call: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
    let expression = call.required_str("expression")?;
    let program = cel::Program::compile(expression).map_err(|e| {
        // The first line says what is wrong and where; the rest repeats the source.
        let error = e.to_string().lines().next().unwrap_or_default().to_string();
        call.bad_argument(
            "expression",
            &Value::from(expression),
            &format!("is not a valid CEL expression ({error})"),
        )
    })?;
    let mut context = cel::Context::default();
    let mut failed = Vec::new();
    let mut checked = 0;
    for (index, doc) in docs.iter().enumerate() {
        if !doc.is_object() {
            continue;
        }
        checked += 1;
        let fail = |value: Value, message: String| FailedAttribute {
            resource: resource_id(doc, index),
            path: String::new(),
            value,
            message,
        };
        if let Err(e) = context.add_variable("r", CelJson(doc)) {
            failed.push(fail(Value::Null, format!("cannot pass the resource to CEL: {e}")));
            continue;
        }
        match program.execute(&context) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => {
                failed.push(fail(Value::Bool(false), format!("`{expression}` is false")));
            }
            Ok(other) => failed.push(fail(
                cel_to_json(&other),
                format!("`{expression}` returned a {} instead of a bool", other.type_of()),
            )),
            Err(e) => failed.push(fail(Value::Null, format!("`{expression}` could not be evaluated: {e}"))),
        }
    }
    let summary = if failed.is_empty() {
        format!("vet-cel: `{expression}` holds for all {checked} resource(s)")
    } else {
        let names: Vec<&str> = failed.iter().map(|f| f.resource.as_str()).collect();
        format!(
            "vet-cel: `{expression}` fails for {} of {checked} resource(s): {}",
            failed.len(),
            names.join(", ")
        )
    };
    Ok(result(docs, failed, vec![summary]))
}

fn is_placeholder(value: &Value) -> bool {
    match value {
        Value::String(s) => s == PLACEHOLDER_STRING,
        Value::Number(n) => {
            n.as_i64() == Some(PLACEHOLDER_NUMBER) || n.as_f64() == Some(PLACEHOLDER_NUMBER as f64)
        }
        _ => false,
    }
}

fn find_placeholders(value: &Value, path: &mut Vec<String>, found: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                path.push(k.clone());
                find_placeholders(v, path, found);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                find_placeholders(v, path, found);
                path.pop();
            }
        }
        v if is_placeholder(v) => found.push((join_path(path), v.clone())),
        _ => {}
    }
}

fn vet_placeholders(docs: &[Value], _call: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
    let mut failed = Vec::new();
    for (index, doc) in docs.iter().enumerate() {
        if !doc.is_object() {
            continue;
        }
        let mut found = Vec::new();
        find_placeholders(doc, &mut Vec::new(), &mut found);
        for (path, value) in found {
            failed.push(FailedAttribute {
                resource: resource_id(doc, index),
                message: format!("{path} is still a placeholder; set a real value"),
                path,
                value,
            });
        }
    }
    let summary = if failed.is_empty() {
        "vet-placeholders: no placeholders found".to_string()
    } else {
        format!("vet-placeholders: {} placeholder value(s) must be replaced", failed.len())
    };
    Ok(result(docs, failed, vec![summary]))
}

#[cfg(test)]
mod tests {
    use super::super::{Argument, FunctionCall, Registry, testdata::stream};
    use super::*;
    use serde_json::json;

    fn vet(docs: &[Value], name: &str, args: &[&str]) -> Result<FunctionOutcome, InvokeError> {
        Registry::builtin().invoke(docs, &FunctionCall::new(name, args.iter().copied()))
    }

    fn validation(out: &FunctionOutcome) -> &ValidationResult {
        out.validation.as_ref().unwrap()
    }

    #[test]
    fn vet_cel_passes() {
        let out = vet(&stream(), "vet-cel", &["r.metadata.name.size() > 0 && r.apiVersion != ''"]).unwrap();
        assert!(!out.changed);
        assert_eq!(out.documents, stream());
        let v = validation(&out);
        assert!(v.passed, "{v:?}");
        assert!(v.failed_attributes.is_empty());
        assert!(v.details[0].contains("holds for all 4 resource(s)"), "{:?}", v.details);
    }

    #[test]
    fn vet_cel_integer_comparisons_and_arithmetic() {
        let docs = stream();
        for expr in [
            "r.kind != 'Deployment' || r.spec.replicas >= 2",
            "r.kind != 'Deployment' || r.spec.replicas + 1 == 4",
            "r.kind != 'Deployment' || r.spec.template.spec.containers[0].ports[0].containerPort == 8080",
            "!has(r.spec) || !has(r.spec.replicas) || r.spec.replicas > 0",
        ] {
            let out = vet(&docs, "vet-cel", &[expr]).unwrap();
            assert!(validation(&out).passed, "{expr}: {:?}", out.validation);
        }
        let out = vet(&docs, "vet-cel", &["r.kind != 'Deployment' || r.spec.replicas >= 5"]).unwrap();
        let v = validation(&out);
        assert!(!v.passed);
        assert_eq!(v.failed_attributes.len(), 1);
        let f = &v.failed_attributes[0];
        assert_eq!(f.resource, "Deployment/web");
        assert_eq!(f.value, json!(false));
        assert!(f.message.contains("is false"), "{}", f.message);
        assert!(v.details[0].contains("fails for 1 of 4 resource(s): Deployment/web"), "{:?}", v.details);
    }

    #[test]
    fn vet_cel_missing_field_is_an_evaluation_failure() {
        let out = vet(&stream(), "vet-cel", &["r.spec.replicas >= 1"]).unwrap();
        let v = validation(&out);
        assert!(!v.passed);
        // Namespace and ConfigMap have no spec; the Service has no replicas.
        let names: Vec<&str> = v.failed_attributes.iter().map(|f| f.resource.as_str()).collect();
        assert_eq!(names, ["Namespace/shop", "Service/web", "ConfigMap/web-config"]);
        assert!(v.failed_attributes.iter().all(|f| f.message.contains("could not be evaluated")));
    }

    #[test]
    fn vet_cel_non_bool_result_fails() {
        let out = vet(&stream(), "vet-cel", &["r.metadata.name"]).unwrap();
        let v = validation(&out);
        assert!(!v.passed);
        assert_eq!(v.failed_attributes.len(), 4);
        assert_eq!(v.failed_attributes[1].value, json!("web"));
        assert!(
            v.failed_attributes[1].message.contains("returned a string instead of a bool"),
            "{}",
            v.failed_attributes[1].message
        );
        let out = vet(&stream(), "vet-cel", &["r.data"]).unwrap();
        let v = validation(&out);
        // Three resources have no data (an evaluation error); the ConfigMap's is a map.
        assert_eq!(v.failed_attributes.len(), 4);
        assert!(v.failed_attributes[0].message.contains("No such key: data"));
        assert_eq!(v.failed_attributes[3].value, json!({"greeting": "hello"}));
        assert!(v.failed_attributes[3].message.contains("returned a map"));
    }

    #[test]
    fn vet_cel_compile_error_is_a_bad_argument() {
        let err = vet(&stream(), "vet-cel", &["r.spec.replicas >= "]).unwrap_err();
        match &err {
            InvokeError::BadArgument { function, parameter, value, reason } => {
                assert_eq!(function, "vet-cel");
                assert_eq!(parameter, "expression");
                assert_eq!(value, "r.spec.replicas >= ");
                assert!(reason.starts_with("is not a valid CEL expression"), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(!err.to_string().contains('\n'));
        for bad in ["", "((((", "r.", "'unterminated"] {
            let err = vet(&stream(), "vet-cel", &[bad]).unwrap_err();
            assert!(matches!(err, InvokeError::BadArgument { .. }), "{bad}: {err}");
        }
        // Runtime errors fail the resources instead.
        let out = vet(&stream(), "vet-cel", &["1 / 0 == 1"]).unwrap();
        assert_eq!(validation(&out).failed_attributes.len(), 4);
        assert!(err.to_string().contains("1:20"), "{err}");
    }

    #[test]
    fn vet_cel_indexes_unnamed_documents() {
        let docs = vec![json!({"a": 1}), Value::Null, json!({"a": 2})];
        let out = vet(&docs, "vet-cel", &["r.a == 1"]).unwrap();
        let v = validation(&out);
        assert_eq!(v.failed_attributes.len(), 1);
        assert_eq!(v.failed_attributes[0].resource, "#2");
    }

    #[test]
    fn vet_placeholders_passes_on_clean_stream() {
        let out = vet(&stream(), "vet-placeholders", &[]).unwrap();
        assert!(validation(&out).passed);
        assert_eq!(validation(&out).details, ["vet-placeholders: no placeholders found"]);
    }

    #[test]
    fn vet_placeholders_finds_nested_paths() {
        let mut docs = stream();
        docs[1]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("confighubplaceholder");
        docs[1]["spec"]["replicas"] = json!(999999999);
        docs[3]["data"]["db.host"] = json!("confighubplaceholder");
        docs[3]["data"]["note"] = json!("not a confighubplaceholder");
        let out = vet(&docs, "vet-placeholders", &[]).unwrap();
        assert!(!out.changed);
        let v = validation(&out);
        assert!(!v.passed);
        let found: Vec<(&str, &str, &Value)> =
            v.failed_attributes.iter().map(|f| (f.resource.as_str(), f.path.as_str(), &f.value)).collect();
        assert_eq!(
            found,
            [
                ("Deployment/web", "spec.replicas", &json!(999999999)),
                ("Deployment/web", "spec.template.spec.containers.0.image", &json!("confighubplaceholder")),
                ("ConfigMap/web-config", "data.db\\.host", &json!("confighubplaceholder")),
            ]
        );
        assert!(v.details[0].contains("3 placeholder"), "{:?}", v.details);
    }

    #[test]
    fn invoke_all_runs_mutators_first_and_combines_results() {
        let mut docs = stream();
        docs[1]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("confighubplaceholder");
        let calls = vec![
            FunctionCall::new("vet-placeholders", Vec::<String>::new()),
            FunctionCall::new("vet-cel", ["r.kind != 'Deployment' || r.spec.replicas >= 4"]),
            FunctionCall::new("set-image", ["web", "shop/web:2.0"]),
            FunctionCall::new("set-replicas", ["4"]),
        ];
        let reg = Registry::builtin();
        let out = reg.invoke_all(&docs, &calls).unwrap();
        assert!(out.changed);
        assert_eq!(out.documents[1]["spec"]["replicas"], 4);
        // The validators saw the mutated documents, so both pass.
        let v = validation(&out);
        assert!(v.passed, "{v:?}");
        assert_eq!(v.details.len(), 2);
        assert!(v.details[0].starts_with("vet-placeholders:"));
        assert!(v.details[1].starts_with("vet-cel:"));

        // One failing validator fails the combination; failures are concatenated.
        let calls = vec![
            FunctionCall::new("vet-placeholders", Vec::<String>::new()),
            FunctionCall::new("vet-cel", ["r.kind != 'Deployment' || r.spec.replicas >= 4"]),
            FunctionCall::new("set-replicas", ["4"]),
        ];
        let out = reg.invoke_all(&docs, &calls).unwrap();
        let v = validation(&out);
        assert!(!v.passed);
        assert_eq!(v.failed_attributes.len(), 1);
        assert_eq!(v.failed_attributes[0].path, "spec.template.spec.containers.0.image");

        // Only mutators: no validation; nothing changed when they are no-ops.
        let out = reg.invoke_all(&docs, &[FunctionCall::new("set-replicas", ["3"])]).unwrap();
        assert!(!out.changed);
        assert!(out.validation.is_none());
        assert_eq!(out.documents, docs);
    }

    #[test]
    fn invoke_all_binds_everything_before_running() {
        let calls = vec![
            FunctionCall::new("set-replicas", ["4"]),
            FunctionCall {
                function_name: "vet-cel".into(),
                arguments: vec![Argument::named("expr", "true")],
            },
        ];
        let err = Registry::builtin().invoke_all(&stream(), &calls).unwrap_err();
        assert!(err.to_string().contains("parameter 'expr' is unknown"), "{err}");
        let err = Registry::builtin()
            .invoke_all(&stream(), &[FunctionCall::new("vet-cell", ["true"])])
            .unwrap_err();
        assert!(matches!(err, InvokeError::UnknownFunction { .. }));
    }
}
