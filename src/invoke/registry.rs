//! The function registry: signatures, argument binding and validation, and running calls.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{
    DataType, FunctionCall, FunctionOutcome, FunctionSignature, InvokeError, ParameterSpec, ValidationResult,
    display_value, mutating, validating,
};

/// Runs one bound call against a Unit's documents. Mutating handlers return the new
/// documents; validating ones return the input documents and a [`ValidationResult`]. The
/// registry recomputes [`FunctionOutcome::changed`] by comparing documents.
pub type Handler = fn(&[Value], &BoundCall) -> Result<FunctionOutcome, InvokeError>;

/// A call whose arguments have been matched to parameters and cast to their data types.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundCall {
    pub function_name: String,
    /// The arguments given, in parameter order, keyed by parameter name. Optional parameters
    /// that were not given are absent.
    pub arguments: Vec<(String, Value)>,
}

impl BoundCall {
    /// The value bound to `parameter`, if it was given.
    pub fn get(&self, parameter: &str) -> Option<&Value> {
        self.arguments.iter().find(|(name, _)| name == parameter).map(|(_, v)| v)
    }

    /// A String parameter's value, or `MissingParameter`.
    pub(crate) fn required_str(&self, parameter: &str) -> Result<&str, InvokeError> {
        match self.get(parameter) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(self.bad_argument(parameter, other, "must be a String")),
            None => Err(self.missing(parameter)),
        }
    }

    /// An optional String parameter's value.
    pub(crate) fn optional_str(&self, parameter: &str) -> Result<Option<&str>, InvokeError> {
        match self.get(parameter) {
            None => Ok(None),
            Some(_) => self.required_str(parameter).map(Some),
        }
    }

    /// An Int parameter's value, or `MissingParameter`.
    pub(crate) fn required_int(&self, parameter: &str) -> Result<i64, InvokeError> {
        match self.get(parameter) {
            Some(v) => v.as_i64().ok_or_else(|| self.bad_argument(parameter, v, "must be an Int")),
            None => Err(self.missing(parameter)),
        }
    }

    pub(crate) fn bad_argument(&self, parameter: &str, value: &Value, reason: &str) -> InvokeError {
        InvokeError::BadArgument {
            function: self.function_name.clone(),
            parameter: parameter.to_string(),
            value: display_value(value),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn execution(&self, reason: impl Into<String>) -> InvokeError {
        InvokeError::Execution { function: self.function_name.clone(), reason: reason.into() }
    }

    fn missing(&self, parameter: &str) -> InvokeError {
        InvokeError::MissingParameter {
            function: self.function_name.clone(),
            parameter: parameter.to_string(),
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    signature: FunctionSignature,
    handler: Handler,
}

/// Known functions by name.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    functions: BTreeMap<String, Entry>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The built-in functions: the `set-*` mutators and the `vet-*` validators.
    pub fn builtin() -> Registry {
        let mut registry = Registry::new();
        for (signature, handler) in mutating::builtins().into_iter().chain(validating::builtins()) {
            registry.register(signature, handler);
        }
        registry
    }

    /// Adds (or replaces) a function.
    pub fn register(&mut self, signature: FunctionSignature, handler: Handler) {
        self.functions.insert(signature.function_name.clone(), Entry { signature, handler });
    }

    /// Every signature, sorted by function name.
    pub fn signatures(&self) -> Vec<&FunctionSignature> {
        self.functions.values().map(|e| &e.signature).collect()
    }

    pub fn get(&self, name: &str) -> Option<&FunctionSignature> {
        self.functions.get(name).map(|e| &e.signature)
    }

    fn entry(&self, name: &str) -> Result<&Entry, InvokeError> {
        self.functions.get(name).ok_or_else(|| InvokeError::UnknownFunction {
            name: name.to_string(),
            known: self.functions.keys().cloned().collect(),
        })
    }

    /// Matches a call's arguments to the function's parameters: positional arguments (no or
    /// empty `ParameterName`) fill parameters in order, named ones go to the parameter of that
    /// name. Values are cast to the parameter's [`DataType`]: strings that parse become `Int`
    /// or `Bool` (`true`/`false`, any case); integers and booleans given for a `String`
    /// parameter become their text.
    pub fn bind(&self, call: &FunctionCall) -> Result<BoundCall, InvokeError> {
        let signature = &self.entry(&call.function_name)?.signature;
        let function = &signature.function_name;
        let params = &signature.parameters;
        let mut slots: Vec<Option<Value>> = vec![None; params.len()];
        let mut next_positional = 0;
        for arg in &call.arguments {
            let index = match arg.parameter_name.as_deref() {
                None | Some("") => {
                    if next_positional >= params.len() {
                        return Err(InvokeError::TooManyArguments {
                            function: function.clone(),
                            max: params.len(),
                            given: call.arguments.len(),
                        });
                    }
                    next_positional += 1;
                    next_positional - 1
                }
                Some(name) => params.iter().position(|p| p.parameter_name == name).ok_or_else(|| {
                    let known: Vec<&str> = params.iter().map(|p| p.parameter_name.as_str()).collect();
                    let reason = if known.is_empty() {
                        "is unknown (the function takes no parameters)".to_string()
                    } else {
                        format!("is unknown (parameters: {})", known.join(", "))
                    };
                    bad(function, name, &arg.value, reason)
                })?,
            };
            let param = &params[index];
            if slots[index].is_some() {
                return Err(bad(
                    function,
                    &param.parameter_name,
                    &arg.value,
                    "is given more than once".to_string(),
                ));
            }
            slots[index] = Some(cast(function, param, &arg.value)?);
        }
        let mut arguments = Vec::new();
        for (param, slot) in params.iter().zip(slots) {
            match slot {
                Some(value) => arguments.push((param.parameter_name.clone(), value)),
                None if param.required => {
                    return Err(InvokeError::MissingParameter {
                        function: function.clone(),
                        parameter: param.parameter_name.clone(),
                    });
                }
                None => {}
            }
        }
        Ok(BoundCall { function_name: function.clone(), arguments })
    }

    /// Binds and runs one call. `changed` is true exactly when the returned documents differ
    /// from `docs`.
    pub fn invoke(&self, docs: &[Value], call: &FunctionCall) -> Result<FunctionOutcome, InvokeError> {
        let bound = self.bind(call)?;
        let entry = self.entry(&bound.function_name)?;
        run(entry, docs, &bound)
    }

    /// Binds every call first (so a bad argument anywhere fails before anything runs), then runs
    /// the mutating calls in order, then the others (validating) in order against the mutated
    /// documents. `validation` combines every validation result (`Passed` when all passed,
    /// details and failed attributes concatenated), and is `None` when no call produced one.
    pub fn invoke_all(&self, docs: &[Value], calls: &[FunctionCall]) -> Result<FunctionOutcome, InvokeError> {
        let mut bound = Vec::with_capacity(calls.len());
        for call in calls {
            let b = self.bind(call)?;
            bound.push((self.entry(&b.function_name)?, b));
        }
        let (mutators, others): (Vec<_>, Vec<_>) = bound.iter().partition(|(e, _)| e.signature.mutating);
        let mut current = docs.to_vec();
        let mut validation: Option<ValidationResult> = None;
        for (entry, call) in mutators.into_iter().chain(others) {
            let outcome = run(entry, &current, call)?;
            current = outcome.documents;
            if let Some(result) = outcome.validation {
                let combined = validation
                    .get_or_insert_with(|| ValidationResult { passed: true, ..ValidationResult::default() });
                combined.passed &= result.passed;
                combined.details.extend(result.details);
                combined.failed_attributes.extend(result.failed_attributes);
            }
        }
        Ok(FunctionOutcome { changed: current.as_slice() != docs, documents: current, validation })
    }
}

fn run(entry: &Entry, docs: &[Value], call: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
    let mut outcome = (entry.handler)(docs, call)?;
    outcome.changed = outcome.documents.as_slice() != docs;
    Ok(outcome)
}

fn bad(function: &str, parameter: &str, value: &Value, reason: String) -> InvokeError {
    InvokeError::BadArgument {
        function: function.to_string(),
        parameter: parameter.to_string(),
        value: display_value(value),
        reason,
    }
}

fn cast(function: &str, param: &ParameterSpec, value: &Value) -> Result<Value, InvokeError> {
    let name = &param.parameter_name;
    match (param.data_type, value) {
        (DataType::String, Value::String(_)) => Ok(value.clone()),
        (DataType::String, Value::Number(_) | Value::Bool(_)) => Ok(Value::String(value.to_string())),
        (DataType::Int, Value::Number(n)) if n.as_i64().is_some() => Ok(value.clone()),
        (DataType::Int, Value::String(s)) if s.trim().parse::<i64>().is_ok() => {
            Ok(Value::from(s.trim().parse::<i64>().unwrap_or_default()))
        }
        (DataType::Bool, Value::Bool(_)) => Ok(value.clone()),
        (DataType::Bool, Value::String(s)) if s.trim().eq_ignore_ascii_case("true") => Ok(Value::Bool(true)),
        (DataType::Bool, Value::String(s)) if s.trim().eq_ignore_ascii_case("false") => {
            Ok(Value::Bool(false))
        }
        (DataType::String, _) => Err(bad(function, name, value, "must be a String".into())),
        (DataType::Int, _) => Err(bad(function, name, value, "must be an Int".into())),
        (DataType::Bool, _) => Err(bad(function, name, value, "must be a Bool (true or false)".into())),
    }
}

/// Builds a parameter spec (for the built-in signatures).
pub(super) fn param(name: &str, data_type: DataType, required: bool, description: &str) -> ParameterSpec {
    ParameterSpec {
        parameter_name: name.to_string(),
        data_type,
        required,
        description: description.to_string(),
    }
}

/// A required String parameter.
pub(super) fn text(name: &str, description: &str) -> ParameterSpec {
    param(name, DataType::String, true, description)
}

/// Builds a signature (for the built-in functions).
pub(super) fn signature(
    name: &str,
    description: &str,
    parameters: Vec<ParameterSpec>,
    mutating: bool,
) -> FunctionSignature {
    FunctionSignature {
        function_name: name.to_string(),
        description: description.to_string(),
        parameters,
        mutating,
        validating: !mutating,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Argument, testdata};
    use super::*;
    use serde_json::json;

    fn reg() -> Registry {
        Registry::builtin()
    }

    #[test]
    fn signatures_are_sorted_and_described() {
        let r = reg();
        let names: Vec<&str> = r.signatures().iter().map(|s| s.function_name.as_str()).collect();
        assert_eq!(
            names,
            [
                "set-annotation",
                "set-env-var",
                "set-image",
                "set-label",
                "set-namespace",
                "set-path",
                "set-replicas",
                "vet-cel",
                "vet-placeholders"
            ]
        );
        for s in r.signatures() {
            assert!(s.description.len() > 20, "{}", s.function_name);
            assert_ne!(s.mutating, s.validating);
            for p in &s.parameters {
                assert!(p.description.len() > 10, "{} {}", s.function_name, p.parameter_name);
            }
        }
        assert!(r.get("set-image").unwrap().mutating);
        assert!(r.get("vet-cel").unwrap().validating);
        assert!(r.get("nope").is_none());
    }

    #[test]
    fn unknown_function_lists_known_names() {
        let err = reg().bind(&FunctionCall::new("set-imag", ["a"])).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, InvokeError::UnknownFunction { ref name, .. } if name == "set-imag"));
        assert!(msg.contains("'set-imag'"), "{msg}");
        assert!(msg.contains("set-image, set-label"), "{msg}");
        assert!(msg.contains("vet-placeholders"), "{msg}");
    }

    #[test]
    fn positional_and_named_arguments() {
        let call = FunctionCall {
            function_name: "set-env-var".into(),
            arguments: vec![
                Argument::named("value", "debug"),
                Argument::positional("web"),
                Argument::positional("LOG_LEVEL"),
            ],
        };
        let b = reg().bind(&call).unwrap();
        assert_eq!(
            b.arguments,
            vec![
                ("container-name".to_string(), json!("web")),
                ("env-var-name".to_string(), json!("LOG_LEVEL")),
                ("value".to_string(), json!("debug")),
            ]
        );
        // An empty ParameterName counts as positional.
        let call = FunctionCall {
            function_name: "set-replicas".into(),
            arguments: vec![Argument { parameter_name: Some(String::new()), value: json!(4) }],
        };
        assert_eq!(reg().bind(&call).unwrap().get("replicas"), Some(&json!(4)));
    }

    #[test]
    fn missing_required_parameter() {
        let err = reg().bind(&FunctionCall::new("set-label", ["team"])).unwrap_err();
        assert_eq!(
            err,
            InvokeError::MissingParameter { function: "set-label".into(), parameter: "value".into() }
        );
        assert_eq!(err.to_string(), "set-label: missing required parameter 'value'");
        // Optional parameters may be left out.
        let b = reg().bind(&FunctionCall::new("set-path", ["a.b", "1"])).unwrap();
        assert_eq!(b.get("resource"), None);
    }

    #[test]
    fn int_and_bool_casts() {
        let b = reg().bind(&FunctionCall::new("set-replicas", [" 5 "])).unwrap();
        assert_eq!(b.get("replicas"), Some(&json!(5)));
        let err = reg().bind(&FunctionCall::new("set-replicas", ["abc"])).unwrap_err();
        assert_eq!(err.to_string(), "set-replicas: parameter 'replicas' must be an Int, got 'abc'");
        let call = FunctionCall {
            function_name: "set-replicas".into(),
            arguments: vec![Argument::positional(true)],
        };
        let err = reg().bind(&call).unwrap_err();
        assert!(matches!(err, InvokeError::BadArgument { ref value, .. } if value == "true"));
        // Ints and bools given for String parameters become their text.
        let call = FunctionCall {
            function_name: "set-label".into(),
            arguments: vec![Argument::positional("tier"), Argument::positional(3)],
        };
        assert_eq!(reg().bind(&call).unwrap().get("value"), Some(&json!("3")));
        let call = FunctionCall {
            function_name: "set-label".into(),
            arguments: vec![Argument::positional("tier"), Argument::positional(json!([1]))],
        };
        assert!(reg().bind(&call).unwrap_err().to_string().contains("must be a String"));
    }

    #[test]
    fn bool_cast() {
        let mut r = Registry::new();
        fn noop(docs: &[Value], _: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
            Ok(FunctionOutcome { documents: docs.to_vec(), changed: true, validation: None })
        }
        r.register(
            signature(
                "flag",
                "Takes a flag for testing.",
                vec![param("on", DataType::Bool, true, "d")],
                true,
            ),
            noop,
        );
        let b = r.bind(&FunctionCall::new("flag", ["TRUE"])).unwrap();
        assert_eq!(b.get("on"), Some(&json!(true)));
        let err = r.bind(&FunctionCall::new("flag", ["yes"])).unwrap_err();
        assert!(err.to_string().contains("parameter 'on' must be a Bool"), "{err}");
        // The registry recomputes `changed` from the documents.
        let out = r.invoke(&testdata::stream(), &FunctionCall::new("flag", ["false"])).unwrap();
        assert!(!out.changed);
    }

    #[test]
    fn too_many_unknown_and_duplicate_arguments() {
        let err = reg().bind(&FunctionCall::new("set-replicas", ["2", "3"])).unwrap_err();
        assert_eq!(err, InvokeError::TooManyArguments { function: "set-replicas".into(), max: 1, given: 2 });
        assert_eq!(err.to_string(), "set-replicas: takes at most 1 argument(s), got 2");
        let err = reg().bind(&FunctionCall::new("vet-placeholders", ["x"])).unwrap_err();
        assert!(matches!(err, InvokeError::TooManyArguments { max: 0, .. }));

        let call = FunctionCall {
            function_name: "set-replicas".into(),
            arguments: vec![Argument::named("count", 2)],
        };
        let err = reg().bind(&call).unwrap_err();
        assert_eq!(
            err.to_string(),
            "set-replicas: parameter 'count' is unknown (parameters: replicas), got '2'"
        );
        let call = FunctionCall {
            function_name: "set-replicas".into(),
            arguments: vec![Argument::positional(2), Argument::named("replicas", 3)],
        };
        let err = reg().bind(&call).unwrap_err();
        assert!(err.to_string().contains("'replicas' is given more than once"), "{err}");
    }
}
