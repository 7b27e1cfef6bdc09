//! The ChangeWorkflow definition as written: its YAML/JSON shape ([`ChangeWorkflowSpec`], with
//! PascalCase keys and unknown keys refused) and reading it, so that a misspelled or mistyped key
//! is reported with its path (`Stages[1].WherSpace`) rather than as a bare serde message.
//! Checking what the definition means is [`compile`](super::compile::compile)'s job.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// A ChangeWorkflow as written (PascalCase keys, unknown keys refused).
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChangeWorkflowSpec {
    /// Ordered waves; at least one.
    pub Stages: Vec<StageSpec>,
    /// When the rollout counts as complete, judged over the last Stage.
    pub Final: FinalSpec,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub CustomPrerequisites: Vec<CustomPrerequisite>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub AttestationPrerequisites: Vec<AttestationPrerequisite>,
}

/// One Stage: which Spaces it selects and what gates entering it and publishing in it.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StageSpec {
    pub Name: String,
    /// A where expression over Spaces; empty selects every Space of the component.
    pub WhereSpace: String,
    /// Entry gates, evaluated over every Space of the Stage before.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub Prerequisites: Vec<String>,
    /// Gates on publishing a Release of the change in one of this Stage's Spaces.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ReleasePrerequisites: Vec<String>,
}

/// The gates that say the rollout is complete.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FinalSpec {
    pub Prerequisites: Vec<String>,
}

/// A gate written as a CEL expression over `Space`, `ChangeOrder` and `Release`.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CustomPrerequisite {
    pub Name: String,
    /// `cel:` followed by the expression.
    pub Expression: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub Description: String,
}

/// A gate requiring Attestations (approvals by default) of the change's Revisions.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttestationPrerequisite {
    pub Name: String,
    /// The Attestation Type that counts; `Approval` by default (also when written empty).
    pub Type: String,
    /// Distinct attesters with a Pass needed on each Revision; 1 by default, 0 means 1.
    pub Count: i64,
    /// Users whose Attestations count; empty means anyone with Approve on the Space.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub FromUserIDs: Vec<Uuid>,
    pub AllowAuthors: bool,
    /// e.g. `72h`, `30m`, `7d`, `1h30m`; empty means no limit.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub MaxAge: String,
    pub IgnoreFail: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub Description: String,
    /// Reserved; refused when non-empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub FromGroupIDs: Vec<Uuid>,
    /// Reserved; refused when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub DistinctGroups: bool,
}

impl Default for AttestationPrerequisite {
    fn default() -> Self {
        AttestationPrerequisite {
            Name: String::new(),
            Type: "Approval".to_string(),
            Count: 1,
            FromUserIDs: Vec::new(),
            AllowAuthors: false,
            MaxAge: String::new(),
            IgnoreFail: false,
            Description: String::new(),
            FromGroupIDs: Vec::new(),
            DistinctGroups: false,
        }
    }
}

/// Why a workflow was refused: the Stage (when there is one), the field path (e.g.
/// `Stages[2].Prerequisites`, `CustomPrerequisites[0].Expression`), the offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowError {
    pub stage: Option<String>,
    pub field: String,
    pub value: String,
    pub message: String,
}

impl WorkflowError {
    pub(crate) fn new(
        stage: Option<&str>,
        field: impl Into<String>,
        value: impl Into<String>,
        message: String,
    ) -> Self {
        WorkflowError { stage: stage.map(String::from), field: field.into(), value: value.into(), message }
    }
}

/// `stage 'prod': Prerequisites: unknown prerequisite 'aproved' (...)`; the `Stages[i].` prefix
/// is dropped when the Stage is named.
impl fmt::Display for WorkflowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = match &self.stage {
            Some(stage) => {
                write!(f, "stage '{stage}': ")?;
                self.field
                    .split_once("].")
                    .filter(|(head, _)| head.starts_with("Stages["))
                    .map_or(&*self.field, |(_, t)| t)
            }
            None => &self.field,
        };
        if field.is_empty() { write!(f, "{}", self.message) } else { write!(f, "{field}: {}", self.message) }
    }
}

impl std::error::Error for WorkflowError {}

/// Reads a workflow from YAML; a misspelled or mistyped key is refused with its path.
pub fn parse_yaml(text: &str) -> Result<ChangeWorkflowSpec, WorkflowError> {
    let value: Value = serde_saphyr::from_str(text)
        .map_err(|e| WorkflowError::new(None, "", "", format!("not valid YAML: {e}")))?;
    from_json(value)
}

/// Reads a workflow from JSON (e.g. the copy frozen onto a ChangeOrder).
pub fn from_json(value: Value) -> Result<ChangeWorkflowSpec, WorkflowError> {
    serde_json::from_value(value.clone()).map_err(|whole| locate(&value, whole))
}

/// Finds the field a failed deserialization is about, by retrying each key on its own (every
/// field has a default, so a one-key object fails only because of that key).
fn locate(value: &Value, whole: serde_json::Error) -> WorkflowError {
    let Some(top) = value.as_object() else {
        let msg = format!(
            "a ChangeWorkflow is a mapping with Stages, Final, CustomPrerequisites and AttestationPrerequisites, not {}",
            kind(value)
        );
        return WorkflowError::new(None, "", "", msg);
    };
    for (key, v) in top {
        let found = match key.as_str() {
            "Stages" => in_list::<StageSpec>(v, key, true),
            "Final" => in_fields::<FinalSpec>(v, key.clone(), None),
            "CustomPrerequisites" => in_list::<CustomPrerequisite>(v, key, false),
            "AttestationPrerequisites" => in_list::<AttestationPrerequisite>(v, key, false),
            _ => probe::<ChangeWorkflowSpec>(key, v).err().map(|m| WorkflowError::new(None, key, key, m)),
        };
        if let Some(e) = found {
            return e;
        }
    }
    WorkflowError::new(None, "", "", serde_message(&whole.to_string()))
}

fn in_list<T: DeserializeOwned>(v: &Value, field: &str, stages: bool) -> Option<WorkflowError> {
    let Some(items) = v.as_array() else {
        return Some(WorkflowError::new(None, field, short(v), format!("must be a list, not {}", kind(v))));
    };
    items.iter().enumerate().find_map(|(i, item)| {
        let stage =
            if stages { item.get("Name").and_then(Value::as_str).filter(|n| !n.is_empty()) } else { None };
        in_fields::<T>(item, format!("{field}[{i}]"), stage)
    })
}

fn in_fields<T: DeserializeOwned>(v: &Value, path: String, stage: Option<&str>) -> Option<WorkflowError> {
    if serde_json::from_value::<T>(v.clone()).is_ok() {
        return None;
    }
    let Some(obj) = v.as_object() else {
        return Some(WorkflowError::new(
            stage,
            path,
            short(v),
            format!("must be a mapping, not {}", kind(v)),
        ));
    };
    let bad = obj.iter().find_map(|(k, fv)| probe::<T>(k, fv).err().map(|m| (k, fv, m)));
    Some(match bad {
        Some((k, fv, m)) => {
            let value = if m.starts_with("unknown field") { k.clone() } else { short(fv) };
            WorkflowError::new(stage, format!("{path}.{k}"), value, m)
        }
        None => WorkflowError::new(stage, path, short(v), "could not be read".to_string()),
    })
}

fn probe<T: DeserializeOwned>(key: &str, v: &Value) -> Result<(), String> {
    let one = Value::Object([(key.to_string(), v.clone())].into_iter().collect());
    serde_json::from_value::<T>(one).map(|_| ()).map_err(|e| serde_message(&e.to_string()))
}

fn serde_message(m: &str) -> String {
    m.replace('`', "'")
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn short(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.chars().count() > 80 { s.chars().take(80).chain("...".chars()).collect() } else { s }
}

#[cfg(test)]
mod tests {
    use crate::gates::compile::tests::{example, names, refused, refused_yaml};

    #[test]
    fn parse_errors_name_the_field() {
        let e = refused_yaml("Stages:\n  - Name: dev\n  - Name: prod\n    WherSpace: x\n");
        names(&e, Some("prod"), "Stages[1].WherSpace", &["unknown field 'WherSpace'", "WhereSpace"]);
        assert_eq!(e.value, "WherSpace");
        let e = refused_yaml("Stages: [{Name: dev, Prerequisites: Released}]");
        names(&e, Some("dev"), "Stages[0].Prerequisites", &["expected a sequence"]);
        let e = refused_yaml("Stages: [{Name: dev}]\nFinal: {Prerequisite: [Released]}");
        names(&e, None, "Final.Prerequisite", &["unknown field"]);
        let e =
            refused_yaml("Stages: [{Name: dev}]\nAttestationPrerequisites: [{Name: a, FromUserIDs: [bob]}]");
        names(&e, None, "AttestationPrerequisites[0].FromUserIDs", &["UUID"]);
        let e = refused_yaml("Stage: []");
        names(&e, None, "Stage", &["unknown field 'Stage'"]);
        let e = refused_yaml("Stages: dev");
        names(&e, None, "Stages", &["must be a list"]);
        let e = refused_yaml("- dev");
        names(&e, None, "", &["mapping"]);
        let e = refused_yaml("Stages: [");
        names(&e, None, "", &["not valid YAML"]);
    }

    #[test]
    fn display_names_the_stage_and_short_field() {
        let mut spec = example();
        spec.Stages[2].Prerequisites[3] = "aproved".into();
        let e = refused(spec);
        names(&e, Some("prod"), "Stages[2].Prerequisites", &["unknown prerequisite 'aproved'"]);
        assert_eq!(e.value, "aproved");
        assert_eq!(
            e.to_string(),
            "stage 'prod': Prerequisites: unknown prerequisite 'aproved' (built in: Validated, Released, \
             Healthy; declared: not-frozen, approved, release-approved)"
        );
        let mut spec = example();
        spec.Final.Prerequisites.push("healthy".into());
        let e = refused(spec);
        names(
            &e,
            None,
            "Final.Prerequisites",
            &["unknown prerequisite 'healthy'", "did you mean 'Healthy'?"],
        );
        assert!(e.to_string().starts_with("Final.Prerequisites: unknown"), "{e}");
    }
}
