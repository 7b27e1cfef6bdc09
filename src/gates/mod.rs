//! ChangeWorkflows and their gates, the pure part: reading a workflow definition ([`workflow`]),
//! compiling it ([`compile()`]), judging attestation requirements per Revision ([`attest`]), and evaluating
//! entry, release and Final gates over facts the caller has gathered ([`eval`]).
//!
//! Nothing here does I/O or reads a clock. The caller (`ops`) reads the ChangeOrder, the Spaces
//! of a Stage, their Releases, live status, validation errors and Attestations, and passes them
//! in as [`SpaceFacts`] with `now`; what comes back are [`Verdict`]s to store, report or refuse
//! on. A workflow is compiled once when it is written ([`compile`] refuses what could never be
//! enforced, naming the Stage and field), and the [`CompiledWorkflow`] is `Send + Sync` so one
//! copy can be shared by every worker. Where a Stage's Spaces are (selector, component, scope)
//! is the caller's business: this module only hands out each Stage's parsed `WhereSpace`.

pub mod attest;
mod compile;
pub mod eval;
mod expr;
pub mod workflow;

pub use attest::{AttestationFact, AttestationResult, Requirement, RequirementVerdict, RevisionFacts};
pub use compile::{
    BUILT_IN, COMPLETED, CompiledStage, CompiledWorkflow, FactNeeds, PROMOTED, compile, parse_duration,
};
pub use eval::{
    LiveFacts, SpaceFacts, UnitValidationError, Verdict, evaluate_entry, evaluate_final, evaluate_release,
    failing,
};
pub use expr::{CEL_PREFIX, CEL_VARIABLES};
pub use workflow::{
    AttestationPrerequisite, ChangeWorkflowSpec, CustomPrerequisite, FinalSpec, StageSpec, WorkflowError,
    from_json, parse_yaml,
};

/// The example workflow of the ChangeWorkflow documentation: dev, staging and prod, with a code
/// freeze check and two kinds of approval.
pub const EXAMPLE_WORKFLOW: &str = r#"Stages:
  - Name: dev
    WhereSpace: "Labels.Stage = 'dev'"
  - Name: staging
    WhereSpace: "Labels.Stage = 'staging'"
    Prerequisites: [Validated, Released]
  - Name: prod
    WhereSpace: "Labels.Stage = 'prod'"
    Prerequisites: [Released, Healthy, not-frozen, approved]
    ReleasePrerequisites: [release-approved]
Final:
  Prerequisites: [Released, Healthy]
CustomPrerequisites:
  - Name: not-frozen
    Expression: "cel:!('code-freeze' in Space.Annotations) || Space.Annotations['code-freeze'] != 'true'"
    Description: the space is not under a code freeze
AttestationPrerequisites:
  - Name: approved
    Count: 2
    Description: two approvals of the change in staging, by people who did not write it
  - Name: release-approved
    FromUserIDs: [9b2c0f3e-5d7a-4a61-8f0e-2b6d1c4e7a90]
    MaxAge: 72h
"#;
