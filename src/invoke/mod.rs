//! Functions that mutate or validate the documents of a Unit, modelled on ConfigHub's
//! function invocations. A Unit's data arrives already parsed, one `serde_json::Value` per
//! YAML document; a [`FunctionCall`] names a function and gives its arguments (positional or
//! by parameter name, each a string, integer or boolean). The [`Registry`] knows every
//! function's [`FunctionSignature`], binds and checks a call's arguments against it (casting
//! CLI strings to `Int`/`Bool` where the parameter asks), and runs it. Mutating functions
//! (`set-image`, `set-label`, `set-annotation`, `set-replicas`, `set-namespace`,
//! `set-env-var`, `set-path`) return new documents and whether anything changed; validating
//! ones (`vet-cel`, `vet-placeholders`) leave the documents alone and return a
//! [`ValidationResult`]. Everything here is pure: no I/O, no clock, no randomness.

mod mutating;
mod registry;
mod validating;

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

pub use registry::{BoundCall, Handler, Registry};
pub use validating::{CelJson, PLACEHOLDER_NUMBER, PLACEHOLDER_STRING};

/// The type of a function parameter; argument values are checked (and cast) against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DataType {
    String,
    Int,
    Bool,
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DataType::String => "String",
            DataType::Int => "Int",
            DataType::Bool => "Bool",
        })
    }
}

/// One parameter of a function, in the order positional arguments fill them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ParameterSpec {
    pub parameter_name: String,
    pub data_type: DataType,
    pub required: bool,
    pub description: String,
}

/// What a function is called, what it does and which arguments it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct FunctionSignature {
    pub function_name: String,
    pub description: String,
    pub parameters: Vec<ParameterSpec>,
    pub mutating: bool,
    pub validating: bool,
}

impl FunctionSignature {
    /// A one-line usage string such as `set-path <path> <value> [resource]`.
    pub fn usage(&self) -> String {
        let mut out = self.function_name.clone();
        for p in &self.parameters {
            if p.required {
                out.push_str(&format!(" <{}>", p.parameter_name));
            } else {
                out.push_str(&format!(" [{}]", p.parameter_name));
            }
        }
        out
    }
}

/// One argument of a call: positional when `parameter_name` is `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Argument {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter_name: Option<String>,
    /// A string, an integer or a boolean.
    pub value: Value,
}

impl Argument {
    pub fn positional(value: impl Into<Value>) -> Argument {
        Argument { parameter_name: None, value: value.into() }
    }

    pub fn named(name: impl Into<String>, value: impl Into<Value>) -> Argument {
        Argument { parameter_name: Some(name.into()), value: value.into() }
    }
}

/// A function invocation: a function name and its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct FunctionCall {
    pub function_name: String,
    #[serde(default)]
    pub arguments: Vec<Argument>,
}

impl FunctionCall {
    /// A call with positional string arguments, as they come from a command line.
    pub fn new<I, S>(function_name: impl Into<String>, args: I) -> FunctionCall
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        FunctionCall {
            function_name: function_name.into(),
            arguments: args.into_iter().map(|a| Argument::positional(a.into())).collect(),
        }
    }
}

/// Renders the call as a command line: `set-image web nginx:1.27`, named arguments as
/// `name=value`, and arguments with spaces quoted.
impl fmt::Display for FunctionCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.function_name)?;
        for arg in &self.arguments {
            let value = display_value(&arg.value);
            let value = if value.is_empty() || value.contains(char::is_whitespace) {
                format!("{value:?}")
            } else {
                value
            };
            match &arg.parameter_name {
                Some(name) => write!(f, " {name}={value}")?,
                None => write!(f, " {value}")?,
            }
        }
        Ok(())
    }
}

/// One value a validating function objected to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct FailedAttribute {
    /// `Kind/name` of the document, or `#index` (0-based) when it has no kind or name.
    pub resource: String,
    /// Dotted path inside the document (empty for the whole document).
    pub path: String,
    pub value: Value,
    pub message: String,
}

/// The result of one or more validating functions.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ValidationResult {
    pub passed: bool,
    pub details: Vec<String>,
    pub failed_attributes: Vec<FailedAttribute>,
}

/// What running one function (or a list of them) produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionOutcome {
    /// The documents after the call; equal to the input when `changed` is false.
    pub documents: Vec<Value>,
    /// Whether the documents differ from the input.
    pub changed: bool,
    /// Present when a validating function ran.
    pub validation: Option<ValidationResult>,
}

/// Why a call could not be bound or run. Every message names the function and, where there is
/// one, the parameter and the offending value.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum InvokeError {
    #[error("unknown function '{name}' (known functions: {})", .known.join(", "))]
    UnknownFunction { name: String, known: Vec<String> },
    #[error("{function}: missing required parameter '{parameter}'")]
    MissingParameter { function: String, parameter: String },
    #[error("{function}: parameter '{parameter}' {reason}, got '{value}'")]
    BadArgument { function: String, parameter: String, value: String, reason: String },
    #[error("{function}: takes at most {max} argument(s), got {given}")]
    TooManyArguments { function: String, max: usize, given: usize },
    #[error("{function}: {reason}")]
    Execution { function: String, reason: String },
}

/// A value as a user typed it: strings bare, everything else as JSON.
pub(crate) fn display_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `Kind/name` of a document, or `#index` when either is missing.
pub(crate) fn resource_id(doc: &Value, index: usize) -> String {
    let kind = doc.get("kind").and_then(Value::as_str);
    let name = doc.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str);
    match (kind, name) {
        (Some(k), Some(n)) if !k.is_empty() && !n.is_empty() => format!("{k}/{n}"),
        _ => format!("#{index}"),
    }
}

/// Joins path segments with dots, escaping dots inside a segment as `\.` (the syntax
/// `set-path` reads).
pub(crate) fn join_path(segments: &[String]) -> String {
    segments.iter().map(|s| s.replace('.', "\\.")).collect::<Vec<_>>().join(".")
}

/// Splits a dotted path (the inverse of [`join_path`]); `\.` is a literal dot inside a segment.
pub(crate) fn split_path(path: &str) -> Vec<String> {
    path.replace("\\.", "\0").split('.').map(|s| s.replace('\0', ".")).collect()
}

/// Reads a `set-path` value the way YAML would read a plain scalar (a small subset).
pub(crate) fn parse_scalar(text: &str) -> Value {
    let quoted = |q: char| text.len() >= 2 && text.starts_with(q) && text.ends_with(q);
    match text {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        _ if quoted('"') || quoted('\'') => Value::from(&text[1..text.len() - 1]),
        _ if INTEGER.is_match(text) => {
            text.parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::from(text))
        }
        _ => Value::from(text),
    }
}

/// Sets `value` at `segments` inside `doc`, creating missing mappings; list indexes may be
/// one past the end to append.
pub(crate) fn set_at(doc: &mut Value, segments: &[String], value: Value) -> Result<(), String> {
    let mut cur = doc;
    for (depth, seg) in segments.iter().enumerate() {
        let last = depth + 1 == segments.len();
        let here = || join_path(&segments[..depth]);
        if cur.is_null() {
            *cur = Value::Object(Map::new());
        }
        cur = match cur {
            Value::Object(map) => map.entry(seg.clone()).or_insert(Value::Null),
            Value::Array(list) => {
                let index: usize = seg
                    .parse()
                    .map_err(|_| format!("'{}' is a list, so '{seg}' must be an index", here()))?;
                if index == list.len() {
                    list.push(Value::Null);
                } else if index > list.len() {
                    return Err(format!(
                        "index {index} is past the end of '{}' ({} items)",
                        here(),
                        list.len()
                    ));
                }
                &mut list[index]
            }
            other => {
                let kind = if other.is_string() { "string" } else { "scalar" };
                return Err(format!("'{}' is a {kind}, not a mapping or list", here()));
            }
        };
        if last {
            *cur = value;
            return Ok(());
        }
    }
    Ok(())
}

static INTEGER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^-?(0|[1-9][0-9]*)$").expect("valid regex"));

#[cfg(test)]
pub(crate) mod testdata {
    use serde_json::{Value, json};

    /// A realistic Unit: Namespace, Deployment, Service, ConfigMap.
    pub fn stream() -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "initContainers": [{"name": "migrate", "image": "shop/migrate:1.0"}],
                            "containers": [
                                {
                                    "name": "web",
                                    "image": "shop/web:1.0",
                                    "env": [{"name": "LOG_LEVEL", "value": "info"}],
                                    "ports": [{"containerPort": 8080}]
                                },
                                {"name": "sidecar", "image": "envoy:1.30"}
                            ]
                        }
                    }
                }
            }),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}
            }),
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "web-config", "namespace": "shop"},
                "data": {"greeting": "hello"}
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serde_uses_confighub_field_names() {
        let call: FunctionCall = serde_json::from_value(json!({
            "FunctionName": "set-replicas",
            "Arguments": [{"Value": 2}, {"ParameterName": "x", "Value": true}]
        }))
        .unwrap();
        assert_eq!(call.arguments[0], Argument::positional(2));
        assert_eq!(call.arguments[1], Argument::named("x", true));
        let sig = Registry::builtin().get("set-replicas").unwrap().clone();
        let v = serde_json::to_value(&sig).unwrap();
        assert_eq!(v["Parameters"][0]["DataType"], "Int");
        assert_eq!(v["Parameters"][0]["ParameterName"], "replicas");
        assert_eq!(v["Mutating"], true);
        let r = ValidationResult {
            passed: false,
            details: vec![],
            failed_attributes: vec![FailedAttribute {
                resource: "Deployment/web".into(),
                path: "spec".into(),
                value: json!(1),
                message: "m".into(),
            }],
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["FailedAttributes"][0]["Resource"], "Deployment/web");
        assert_eq!(v["Passed"], false);
    }

    #[test]
    fn call_display_and_usage() {
        let mut call = FunctionCall::new("set-label", ["team", "two words"]);
        call.arguments.push(Argument::named("extra", 3));
        assert_eq!(call.to_string(), "set-label team \"two words\" extra=3");
        let reg = Registry::builtin();
        assert_eq!(reg.get("set-path").unwrap().usage(), "set-path <path> <value> [resource]");
    }

    #[test]
    fn resource_ids_and_paths() {
        let docs = testdata::stream();
        assert_eq!(resource_id(&docs[1], 1), "Deployment/web");
        assert_eq!(resource_id(&json!({"kind": "X"}), 4), "#4");
        assert_eq!(
            join_path(&["metadata".into(), "app.kubernetes.io/name".into()]),
            "metadata.app\\.kubernetes\\.io/name"
        );
    }

    #[test]
    fn scalar_parsing() {
        assert_eq!(parse_scalar("true"), json!(true));
        assert_eq!(parse_scalar("false"), json!(false));
        assert_eq!(parse_scalar("null"), Value::Null);
        assert_eq!(parse_scalar("42"), json!(42));
        assert_eq!(parse_scalar("-3"), json!(-3));
        assert_eq!(parse_scalar("007"), json!("007"));
        assert_eq!(parse_scalar("1.5"), json!("1.5"));
        assert_eq!(parse_scalar("'42'"), json!("42"));
        assert_eq!(parse_scalar("\"true\""), json!("true"));
        assert_eq!(parse_scalar("'"), json!("'"));
        assert_eq!(parse_scalar("nginx:1.27"), json!("nginx:1.27"));
        assert_eq!(split_path("a.b\\.c.0"), vec!["a", "b.c", "0"]);
    }
}
