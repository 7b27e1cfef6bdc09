//! Running functions on Units: one call (`function do`) or a stored Invocation with parameters.
//! Arguments are bound and checked before anything is read or written; every Unit's new
//! revision is written in one transaction, so a failure on one Unit writes nothing anywhere.

use super::units::append_revision;
use super::{Actor, OpError, Result, list_units, resolve};
use crate::invoke::{FunctionCall, FunctionSignature, InvokeError, Registry, ValidationResult};
use crate::model::{
    Invocation, InvocationParameter, Labels, Permission, RevisionSource, Slug, Space, ToolchainType, Unit,
    parse_stream, render_stream,
};
use crate::store::{Store, Tx};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::LazyLock;
use uuid::Uuid;

static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::builtin);

/// The function registry every entry point shares.
pub fn registry() -> &'static Registry {
    &REGISTRY
}

/// Every function, sorted by name.
pub fn list_functions() -> Vec<FunctionSignature> {
    registry().signatures().into_iter().cloned().collect()
}

impl From<InvokeError> for OpError {
    fn from(e: InvokeError) -> Self {
        let msg = e.to_string();
        match e {
            InvokeError::UnknownFunction { name, .. } => OpError::invalid("FunctionName", name, msg),
            InvokeError::MissingParameter { parameter, .. } => OpError::invalid(parameter, "", msg),
            InvokeError::BadArgument { parameter, value, .. } => OpError::invalid(parameter, value, msg),
            InvokeError::TooManyArguments { function, .. } => OpError::invalid("Arguments", function, msg),
            InvokeError::Execution { function, .. } => OpError::unprocessable("FunctionName", function, msg),
        }
    }
}

/// Which Units of a Space a function runs on: one by name, those matching a where expression,
/// or (neither given) all of them.
#[allow(non_snake_case)]
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitSelection {
    #[serde(default)]
    pub Unit: Option<String>,
    #[serde(default)]
    pub Where: Option<String>,
}

/// The body of `function do`.
#[allow(non_snake_case)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionDo {
    pub FunctionName: String,
    #[serde(default)]
    pub Arguments: Vec<crate::invoke::Argument>,
    #[serde(default, flatten)]
    pub Selection: UnitSelection,
    #[serde(default)]
    pub DryRun: bool,
    #[serde(default)]
    pub ChangeDescription: Option<String>,
}

/// What a function did to one Unit.
#[allow(non_snake_case)]
#[derive(Debug, Serialize)]
pub struct FunctionResult {
    pub UnitID: Uuid,
    pub UnitSlug: String,
    pub Changed: bool,
    /// The revision written; absent when nothing changed or on a dry run.
    pub RevisionNum: Option<i64>,
    pub Validation: Option<ValidationResult>,
    /// On a dry run, the data the Unit would have.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub Data: Option<String>,
}

async fn select_units(store: &Store, actor: &Actor, space: &Space, sel: &UnitSelection) -> Result<Vec<Unit>> {
    if let Some(u) = &sel.Unit {
        let mut tx = store.read().await?;
        return Ok(vec![resolve::in_space::<Unit>(&mut tx, space, u).await?]);
    }
    list_units(store, actor, Some(&space.SpaceID.to_string()), sel.Where.as_deref()).await
}

/// Runs `calls` on each of `units` inside `tx`; mutations write one `Invoke` revision per Unit.
pub(crate) async fn apply_calls(
    tx: &mut Tx,
    actor: &Actor,
    units: Vec<Unit>,
    calls: &[FunctionCall],
    dry_run: bool,
    description: &str,
) -> Result<Vec<FunctionResult>> {
    let mut out = vec![];
    for unit in units {
        // Re-read inside the write transaction: the head may have moved since selection.
        let mut unit = tx.must_get::<Unit>(unit.UnitID).await?;
        let (_, data) = tx.must_revision(unit.UnitID, unit.HeadRevisionNum).await?;
        let docs = parse_stream(&data)?;
        let outcome = registry().invoke_all(&docs, calls).map_err(|e| match e {
            InvokeError::Execution { function, reason } => OpError::unprocessable(
                "Unit",
                unit.Slug.as_str(),
                format!("{function} failed on unit '{}': {reason}", unit.Slug),
            ),
            other => other.into(),
        })?;
        let new_data = outcome.changed.then(|| render_stream(&outcome.documents));
        let mut revision_num = None;
        if let (Some(d), false) = (&new_data, dry_run) {
            let upstream = unit.UpstreamRevisionNum;
            let rev =
                append_revision(tx, &mut unit, d, RevisionSource::Invoke, actor.id(), description, upstream)
                    .await?;
            revision_num = Some(rev.RevisionNum);
            tx.update(&mut unit).await?;
        }
        out.push(FunctionResult {
            UnitID: unit.UnitID,
            UnitSlug: unit.Slug.to_string(),
            Changed: outcome.changed,
            RevisionNum: revision_num,
            Validation: outcome.validation,
            Data: if dry_run { new_data } else { None },
        });
    }
    Ok(out)
}

/// Runs one function on the selected Units of a Space. Mutating functions need Edit.
pub async fn function_do(
    store: &Store,
    actor: &Actor,
    space: &str,
    req: FunctionDo,
) -> Result<Vec<FunctionResult>> {
    let call = FunctionCall { function_name: req.FunctionName.clone(), arguments: req.Arguments.clone() };
    let sig = registry().bind(&call).map(|_| registry().get(&req.FunctionName).cloned())?;
    let mutating = sig.is_some_and(|s| s.mutating);
    let sp = get_space_checked(
        store,
        actor,
        space,
        if mutating && !req.DryRun { Permission::Edit } else { Permission::View },
    )
    .await?;
    let units = select_units(store, actor, &sp, &req.Selection).await?;
    let desc = req.ChangeDescription.clone().unwrap_or_else(|| call.to_string());
    let mut tx = store.write().await?;
    let out = apply_calls(&mut tx, actor, units, &[call], req.DryRun, &desc).await?;
    tx.commit().await?;
    Ok(out)
}

async fn get_space_checked(store: &Store, actor: &Actor, space: &str, need: Permission) -> Result<Space> {
    let mut tx = store.read().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), need)?;
    Ok(sp)
}

/// The body of an Invocation creation (also what `invocation create --file` reads as YAML).
#[allow(non_snake_case)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateInvocation {
    pub Slug: String,
    #[serde(default)]
    pub ToolchainType: Option<String>,
    #[serde(default)]
    pub Parameters: Vec<InvocationParameter>,
    pub FunctionInvocations: Vec<FunctionCall>,
    #[serde(default)]
    pub Labels: Labels,
}

/// The parameter names an argument refers to as `{{ .name }}`.
fn placeholders(s: &str) -> Vec<String> {
    static RE: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"\{\{\s*\.([A-Za-z0-9_-]+)\s*\}\}").expect("valid regex"));
    RE.captures_iter(s).map(|c| c[1].to_string()).collect()
}

/// Replaces `{{ .name }}` in every string argument with the parameter's value.
fn substitute(calls: &[FunctionCall], params: &BTreeMap<String, String>) -> Vec<FunctionCall> {
    let mut calls = calls.to_vec();
    for c in &mut calls {
        for a in &mut c.arguments {
            if let Some(s) = a.value.as_str() {
                let mut v = s.to_string();
                for name in placeholders(s) {
                    let value = params.get(&name).cloned().unwrap_or_default();
                    let re = regex::Regex::new(&format!(r"\{{\{{\s*\.{}\s*\}}\}}", regex::escape(&name)))
                        .expect("escaped");
                    v = re.replace_all(&v, regex::NoExpand(&value)).into_owned();
                }
                a.value = serde_json::Value::String(v);
            }
        }
    }
    calls
}

fn sample_value(data_type: &str) -> String {
    match data_type {
        "Int" => "1".into(),
        "Bool" => "true".into(),
        _ => "x".into(),
    }
}

/// Checks an Invocation's declared parameters and calls; errors name the index and field.
fn check_invocation(params: &[InvocationParameter], calls: &[FunctionCall]) -> Result<()> {
    if calls.is_empty() {
        return Err(OpError::invalid(
            "FunctionInvocations",
            "[]",
            "an invocation needs at least one function call",
        ));
    }
    let mut samples = BTreeMap::new();
    for (i, p) in params.iter().enumerate() {
        if !matches!(p.DataType.as_str(), "String" | "Int" | "Bool") {
            return Err(OpError::invalid(
                format!("Parameters[{i}].DataType"),
                &p.DataType,
                "expected String, Int or Bool",
            ));
        }
        Slug::parse_field(&format!("Parameters[{i}].Name"), &p.Name)?;
        if samples.insert(p.Name.clone(), sample_value(&p.DataType)).is_some() {
            return Err(OpError::invalid(format!("Parameters[{i}].Name"), &p.Name, "declared twice"));
        }
    }
    for (i, c) in calls.iter().enumerate() {
        if registry().get(&c.function_name).is_none() {
            registry().bind(c).map_err(|e| {
                OpError::invalid(
                    format!("FunctionInvocations[{i}].FunctionName"),
                    &c.function_name,
                    e.to_string(),
                )
            })?;
        }
        for a in &c.arguments {
            for name in a.value.as_str().map(placeholders).unwrap_or_default() {
                if !samples.contains_key(&name) {
                    return Err(OpError::invalid(
                        format!("FunctionInvocations[{i}].Arguments"),
                        format!("{{{{ .{name} }}}}"),
                        format!("refers to parameter '{name}', which is not declared in Parameters"),
                    ));
                }
            }
        }
    }
    for (i, c) in substitute(calls, &samples).iter().enumerate() {
        registry().bind(c).map_err(|e| {
            OpError::invalid(format!("FunctionInvocations[{i}]"), c.to_string(), e.to_string())
        })?;
    }
    Ok(())
}

/// Creates an Invocation after checking every call against the registry. Needs Edit.
pub async fn create_invocation(
    store: &Store,
    actor: &Actor,
    space: &str,
    req: CreateInvocation,
) -> Result<Invocation> {
    let slug = Slug::parse(&req.Slug)?;
    let toolchain: ToolchainType = match &req.ToolchainType {
        Some(t) => t.parse()?,
        None => ToolchainType::default(),
    };
    check_invocation(&req.Parameters, &req.FunctionInvocations)?;
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Edit)?;
    let now = Utc::now();
    let inv = Invocation {
        InvocationID: Uuid::new_v4(),
        SpaceID: sp.SpaceID,
        DisplayName: slug.to_string(),
        Slug: slug,
        Labels: req.Labels,
        Annotations: Labels::new(),
        ToolchainType: toolchain,
        Parameters: req.Parameters,
        FunctionInvocations: req.FunctionInvocations,
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    tx.insert(&inv).await?;
    tx.commit().await?;
    Ok(inv)
}

/// Binds parameter values to an Invocation's calls: every required parameter must be given
/// and every given one declared.
pub fn bind_invocation(inv: &Invocation, params: &BTreeMap<String, String>) -> Result<Vec<FunctionCall>> {
    for name in params.keys() {
        if !inv.Parameters.iter().any(|p| &p.Name == name) {
            return Err(OpError::invalid(
                format!("Parameters.{name}"),
                &params[name],
                format!("invocation '{}' declares no parameter '{name}'", inv.Slug),
            ));
        }
    }
    for p in &inv.Parameters {
        if p.Required && !params.contains_key(&p.Name) {
            return Err(OpError::invalid(
                format!("Parameters.{}", p.Name),
                "",
                format!("invocation '{}' requires parameter '{}' ({})", inv.Slug, p.Name, p.DataType),
            ));
        }
    }
    let calls = substitute(&inv.FunctionInvocations, params);
    for c in &calls {
        registry().bind(c)?;
    }
    Ok(calls)
}

/// The body of an Invocation run.
#[allow(non_snake_case)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunInvocation {
    /// `space/slug` or UUID of the Invocation (or a slug in the target Space).
    pub Invocation: String,
    #[serde(default)]
    pub Parameters: BTreeMap<String, String>,
    #[serde(default, flatten)]
    pub Selection: UnitSelection,
    #[serde(default)]
    pub DryRun: bool,
    #[serde(default)]
    pub ChangeDescription: Option<String>,
}

/// Runs a stored Invocation on the selected Units of `space`. Needs Edit there (View on a dry
/// run) and View on the Invocation's Space.
pub async fn run_invocation(
    store: &Store,
    actor: &Actor,
    space: &str,
    req: RunInvocation,
) -> Result<Vec<FunctionResult>> {
    let need = if req.DryRun { Permission::View } else { Permission::Edit };
    let sp = get_space_checked(store, actor, space, need).await?;
    let (inv_space, inv) = {
        let mut tx = store.read().await?;
        resolve::qualified::<Invocation>(&mut tx, &req.Invocation, Some(&sp)).await?
    };
    actor.require(inv_space.SpaceID, inv_space.Slug.as_str(), Permission::View)?;
    let calls = bind_invocation(&inv, &req.Parameters)?;
    let units: Vec<Unit> = select_units(store, actor, &sp, &req.Selection)
        .await?
        .into_iter()
        .filter(|u| u.ToolchainType == inv.ToolchainType)
        .collect();
    let desc = req
        .ChangeDescription
        .clone()
        .unwrap_or_else(|| format!("invocation {}/{}", inv_space.Slug, inv.Slug));
    let mut tx = store.write().await?;
    let out = apply_calls(&mut tx, actor, units, &calls, req.DryRun, &desc).await?;
    tx.commit().await?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str, dt: &str, required: bool) -> InvocationParameter {
        InvocationParameter {
            Name: name.into(),
            DataType: dt.into(),
            Required: required,
            Description: String::new(),
        }
    }

    #[test]
    fn invocation_checks_name_the_culprit() {
        let calls = vec![FunctionCall::new("set-image", ["web", "{{ .image }}"])];
        assert!(check_invocation(&[param("image", "String", true)], &calls).is_ok());
        let e = check_invocation(&[], &calls).unwrap_err();
        assert!(e.to_string().contains("'image'"), "{e}");
        let bad = vec![FunctionCall::new("set-imagez", ["web", "x"])];
        let e = check_invocation(&[], &bad).unwrap_err();
        assert_eq!(e.field_value().0.as_deref(), Some("FunctionInvocations[0].FunctionName"));
        let e = check_invocation(&[param("n", "Float", false)], &calls).unwrap_err();
        assert_eq!(e.field_value().0.as_deref(), Some("Parameters[0].DataType"));
    }

    #[test]
    fn binding_parameters() {
        let now = Utc::now();
        let inv = Invocation {
            InvocationID: Uuid::new_v4(),
            SpaceID: Uuid::new_v4(),
            Slug: Slug::parse("bump").unwrap(),
            DisplayName: "bump".into(),
            Labels: Labels::new(),
            Annotations: Labels::new(),
            ToolchainType: ToolchainType::KubernetesYaml,
            Parameters: vec![param("image", "String", true)],
            FunctionInvocations: vec![FunctionCall::new("set-image", ["*", "{{ .image }}"])],
            Version: 1,
            CreatedAt: now,
            UpdatedAt: now,
        };
        let mut p = BTreeMap::new();
        let e = bind_invocation(&inv, &p).unwrap_err();
        assert_eq!(e.field_value().0.as_deref(), Some("Parameters.image"));
        p.insert("image".to_string(), "nginx:2".to_string());
        let calls = bind_invocation(&inv, &p).unwrap();
        assert_eq!(calls[0].arguments[1].value, "nginx:2");
        p.insert("other".to_string(), "x".to_string());
        assert!(bind_invocation(&inv, &p).is_err());
    }
}
