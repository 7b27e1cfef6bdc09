//! ChangeWorkflows: written as YAML, checked and compiled when written (a refusal names the
//! Stage and field), read back as JSON.

use super::{Actor, OpError, Result, resolve};
use crate::gates::{self, ChangeWorkflowSpec, CompiledWorkflow, WorkflowError};
use crate::model::{ChangeWorkflow, Labels, Permission, Slug};
use crate::store::Store;
use chrono::Utc;
use serde::Deserialize;
use uuid::Uuid;

impl From<WorkflowError> for OpError {
    fn from(e: WorkflowError) -> Self {
        let message = e.to_string();
        OpError::invalid(e.field, e.value, message)
    }
}

/// Parses and compiles a definition written as YAML.
pub fn compile_yaml(text: &str) -> Result<(ChangeWorkflowSpec, CompiledWorkflow)> {
    let spec = gates::parse_yaml(text)?;
    let compiled = gates::compile(spec.clone())?;
    Ok((spec, compiled))
}

/// The body of a ChangeWorkflow creation or update: the definition as YAML text.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteChangeWorkflow {
    #[serde(default)]
    pub Slug: Option<String>,
    #[serde(default)]
    pub Description: Option<String>,
    /// The YAML document: Stages, Final, CustomPrerequisites, AttestationPrerequisites.
    pub Definition: String,
    /// On update: the Version read.
    #[serde(default)]
    pub Version: Option<i64>,
}

fn apply(wf: &mut ChangeWorkflow, spec: ChangeWorkflowSpec) {
    wf.Stages = spec.Stages;
    wf.Final = spec.Final;
    wf.CustomPrerequisites = spec.CustomPrerequisites;
    wf.AttestationPrerequisites = spec.AttestationPrerequisites;
}

/// Creates a ChangeWorkflow in `space`. Needs Manage there: a workflow governs rollouts.
pub async fn create_change_workflow(
    store: &Store,
    actor: &Actor,
    space: &str,
    req: WriteChangeWorkflow,
) -> Result<ChangeWorkflow> {
    let slug = Slug::parse(req.Slug.as_deref().unwrap_or_default())?;
    let (spec, _) = compile_yaml(&req.Definition)?;
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Manage)?;
    let now = Utc::now();
    let mut wf = ChangeWorkflow {
        ChangeWorkflowID: Uuid::new_v4(),
        SpaceID: sp.SpaceID,
        DisplayName: slug.to_string(),
        Slug: slug,
        Description: req.Description.unwrap_or_default(),
        Labels: Labels::new(),
        Annotations: Labels::new(),
        Stages: vec![],
        Final: Default::default(),
        CustomPrerequisites: vec![],
        AttestationPrerequisites: vec![],
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    apply(&mut wf, spec);
    tx.insert(&wf).await?;
    tx.commit().await?;
    Ok(wf)
}

/// Replaces a ChangeWorkflow's definition. ChangeOrders created before keep their copy.
pub async fn update_change_workflow(
    store: &Store,
    actor: &Actor,
    space: &str,
    key: &str,
    req: WriteChangeWorkflow,
) -> Result<ChangeWorkflow> {
    let (spec, _) = compile_yaml(&req.Definition)?;
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Manage)?;
    let mut wf = resolve::in_space::<ChangeWorkflow>(&mut tx, &sp, key).await?;
    if let Some(v) = req.Version {
        wf.Version = v;
    }
    if let Some(d) = req.Description {
        wf.Description = d;
    }
    apply(&mut wf, spec);
    tx.update(&mut wf).await?;
    tx.commit().await?;
    Ok(wf)
}
