//! Evaluating a compiled workflow's gates over facts the caller has read: entry gates over the
//! Spaces of the Stage before, Final over the last Stage, release gates over the Revisions a
//! Release bundles. Pure: no clock (the caller passes `now`) and no store.
//!
//! Every gate is a read of current state, so the caller gathers fresh [`SpaceFacts`] for each
//! evaluation. For each Space, `Promoted` comes first whatever is declared, then the listed
//! prerequisites in order; every gate is evaluated (none short-circuits) so that a refusal can
//! say everything that is wrong at once. A Stage that selects no Space fails loudly with one
//! `Promoted` verdict that names no Space.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::attest::RevisionFacts;
use super::compile::{CompiledWorkflow, Gate, PROMOTED};
use super::expr;

/// Most Units with validation errors spelled out in one message.
const MAX_LISTED: usize = 5;

/// What the GitOps operator last reported for the Space's current Release (raw words).
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LiveFacts {
    /// `Synced` is healthy.
    pub Sync: String,
    /// `Succeeded` is healthy.
    pub Operation: String,
    /// `Healthy` is healthy.
    pub Health: String,
}

/// A Unit with validation errors on the revision the ChangeOrder's end Tag marks.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitValidationError {
    pub UnitSlug: String,
    pub Message: String,
}

/// Everything the gates read about one Space, gathered fresh for each evaluation.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpaceFacts {
    pub SpaceID: Uuid,
    pub Slug: String,
    /// The Space as the API returns it (bound to CEL as `Space`).
    pub Space: Value,
    /// The Space is in the ChangeOrder's ResolvedSpaceIDs (it has taken the change).
    pub Promoted: bool,
    /// Units with validation errors on the revision the end Tag marks.
    #[serde(default)]
    pub ValidationErrors: Vec<UnitValidationError>,
    /// The Space has a release Target.
    pub HasReleaseTarget: bool,
    /// The Space is in the ChangeOrder's ReleasedSpaceIDs.
    pub Released: bool,
    /// The earliest published Release carrying the change (bound to CEL as `Release`, or null).
    #[serde(default)]
    pub Release: Option<Value>,
    #[serde(default)]
    pub LiveStatus: Option<LiveFacts>,
    /// The revisions the end Tag marks (entry and Final gates) or the Release bundles (release
    /// gates), for attestation prerequisites.
    #[serde(default)]
    pub Revisions: Vec<RevisionFacts>,
}

/// One gate's outcome on one Space, as a promotion or publish reports it.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub Prerequisite: String,
    pub Satisfied: bool,
    pub Message: String,
    /// Nil when the verdict is about a Stage that selects no Space.
    pub SpaceID: Uuid,
    pub SpaceSlug: String,
}

/// `approved on staging-eu: web#3 has 1 of 2 approvals (...)`.
impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.SpaceSlug.is_empty() {
            write!(f, "{}: {}", self.Prerequisite, self.Message)
        } else {
            write!(f, "{} on {}: {}", self.Prerequisite, self.SpaceSlug, self.Message)
        }
    }
}

/// The verdicts that are not satisfied.
pub fn failing(verdicts: &[Verdict]) -> Vec<&Verdict> {
    verdicts.iter().filter(|v| !v.Satisfied).collect()
}

/// The entry gates of Stage `stage_index`, over every Space of the Stage before it. The first
/// Stage's are never evaluated (nothing is returned).
///
/// # Panics
/// When `stage_index` is not a Stage of `wf`.
pub fn evaluate_entry(
    wf: &CompiledWorkflow,
    stage_index: usize,
    previous_stage_spaces: &[SpaceFacts],
    change_order: &Value,
    now: DateTime<Utc>,
) -> Vec<Verdict> {
    let stage = &wf.stages()[stage_index];
    if stage_index == 0 {
        return Vec::new();
    }
    let previous = wf.stages()[stage_index - 1].name();
    over_stage(wf, &stage.entry, previous, previous_stage_spaces, change_order, now)
}

/// Final's prerequisites over the last Stage: when every verdict holds, the rollout is complete.
pub fn evaluate_final(
    wf: &CompiledWorkflow,
    last_stage_spaces: &[SpaceFacts],
    change_order: &Value,
    now: DateTime<Utc>,
) -> Vec<Verdict> {
    let last = wf.stages().last().expect("a compiled workflow has a Stage").name();
    over_stage(wf, &wf.final_gates, last, last_stage_spaces, change_order, now)
}

/// The release gates of Stage `stage_index` for publishing in `space`, whose `Revisions` are the
/// ones the Release would bundle. Only attestation prerequisites can be listed there, so the
/// ChangeOrder is not read (it is taken for symmetry and future gates).
///
/// # Panics
/// When `stage_index` is not a Stage of `wf`.
pub fn evaluate_release(
    wf: &CompiledWorkflow,
    stage_index: usize,
    space: &SpaceFacts,
    _change_order: &Value,
    now: DateTime<Utc>,
) -> Vec<Verdict> {
    let stage = &wf.stages()[stage_index];
    let mut cel = CelState::new(&Value::Null);
    stage.release.iter().map(|&i| gate(wf, Gate::Attestation(i), space, &mut cel, now)).collect()
}

fn over_stage(
    wf: &CompiledWorkflow,
    gates: &[Gate],
    stage: &str,
    spaces: &[SpaceFacts],
    change_order: &Value,
    now: DateTime<Utc>,
) -> Vec<Verdict> {
    if spaces.is_empty() {
        return vec![Verdict {
            Prerequisite: PROMOTED.to_string(),
            Satisfied: false,
            Message: format!(
                "stage '{stage}' selects no Space, so the change cannot have moved through it; \
                 check its WhereSpace and the ChangeOrder's scope"
            ),
            SpaceID: Uuid::nil(),
            SpaceSlug: String::new(),
        }];
    }
    let mut cel = CelState::new(change_order);
    let mut out = Vec::with_capacity(spaces.len() * (gates.len() + 1));
    for space in spaces {
        cel.space = None;
        out.push(verdict(PROMOTED, space, promoted(space)));
        out.extend(gates.iter().map(|&g| gate(wf, g, space, &mut cel, now)));
    }
    out
}

/// The bound ChangeOrder (converted once) and the current Space's context (built on first use).
struct CelState<'a> {
    change_order: &'a Value,
    change_order_cel: Option<Result<cel::Value, String>>,
    space: Option<Result<cel::Context<'static, 'static>, String>>,
}

impl<'a> CelState<'a> {
    fn new(change_order: &'a Value) -> Self {
        CelState { change_order, change_order_cel: None, space: None }
    }

    fn context(&mut self, space: &SpaceFacts) -> &Result<cel::Context<'static, 'static>, String> {
        let change_order = self.change_order;
        let co = self.change_order_cel.get_or_insert_with(|| expr::to_cel(change_order)).clone();
        self.space.get_or_insert_with(|| {
            let mut ctx = expr::context();
            let co = co.map_err(|e| format!("the ChangeOrder cannot be passed to CEL: {e}"))?;
            let space_cel =
                expr::to_cel(&space.Space).map_err(|e| format!("the Space cannot be passed to CEL: {e}"))?;
            let release = match &space.Release {
                Some(r) => {
                    expr::to_cel(r).map_err(|e| format!("the Release cannot be passed to CEL: {e}"))?
                }
                None => cel::Value::Null,
            };
            ctx.add_variable_from_value("Space", space_cel);
            ctx.add_variable_from_value("ChangeOrder", co);
            ctx.add_variable_from_value("Release", release);
            Ok(ctx)
        })
    }
}

fn verdict(name: &str, space: &SpaceFacts, (ok, message): (bool, String)) -> Verdict {
    Verdict {
        Prerequisite: name.to_string(),
        Satisfied: ok,
        Message: message,
        SpaceID: space.SpaceID,
        SpaceSlug: space.Slug.clone(),
    }
}

fn gate(
    wf: &CompiledWorkflow,
    g: Gate,
    space: &SpaceFacts,
    cel: &mut CelState,
    now: DateTime<Utc>,
) -> Verdict {
    let outcome = match g {
        Gate::Validated => validated(space),
        Gate::Released => released(space),
        Gate::Healthy => healthy(space),
        Gate::Custom(i) => custom(wf, i, space, cel),
        Gate::Attestation(i) => {
            let v = wf.requirements()[i].evaluate(&space.Revisions, now);
            (v.satisfied, v.message)
        }
    };
    verdict(wf.gate_name(g), space, outcome)
}

fn promoted(space: &SpaceFacts) -> (bool, String) {
    if space.Promoted {
        (true, "has taken the change".to_string())
    } else {
        (false, "has not taken the change (it is not in the ChangeOrder's ResolvedSpaceIDs)".to_string())
    }
}

fn validated(space: &SpaceFacts) -> (bool, String) {
    let errors = &space.ValidationErrors;
    if errors.is_empty() {
        return (true, "no Unit has validation errors at the end Tag".to_string());
    }
    let mut listed: Vec<String> =
        errors.iter().take(MAX_LISTED).map(|e| format!("{}: {}", e.UnitSlug, e.Message)).collect();
    if errors.len() > MAX_LISTED {
        listed.push(format!("and {} more", errors.len() - MAX_LISTED));
    }
    let n = errors.len();
    let units = if n == 1 { "Unit has" } else { "Units have" };
    (false, format!("{n} {units} validation errors at the end Tag: {}", listed.join("; ")))
}

fn released(space: &SpaceFacts) -> (bool, String) {
    if !space.HasReleaseTarget {
        (false, "has no release Target, so it cannot publish a Release".to_string())
    } else if !space.Released {
        (false, "has not published a Release carrying the change".to_string())
    } else {
        (true, "has published a Release carrying the change".to_string())
    }
}

fn healthy(space: &SpaceFacts) -> (bool, String) {
    if !space.HasReleaseTarget {
        return (false, "has no release Target, so it can never be Healthy".to_string());
    }
    if !space.Released {
        return (
            false,
            "has not published a Release carrying the change (Healthy implies Released)".to_string(),
        );
    }
    let Some(live) = &space.LiveStatus else {
        return (false, "no live status has been reported for its Release yet".to_string());
    };
    let wrong: Vec<String> = [
        ("Sync", &live.Sync, "Synced"),
        ("Operation", &live.Operation, "Succeeded"),
        ("Health", &live.Health, "Healthy"),
    ]
    .into_iter()
    .filter(|(_, got, want)| got.as_str() != *want)
    .map(|(what, got, want)| {
        let got = if got.is_empty() { "not reported" } else { got.as_str() };
        format!("{what} is {got} (needs {want})")
    })
    .collect();
    if wrong.is_empty() {
        (true, "live status is Synced, Succeeded and Healthy".to_string())
    } else {
        (false, format!("live status: {}", wrong.join(", ")))
    }
}

fn custom(wf: &CompiledWorkflow, i: usize, space: &SpaceFacts, cel: &mut CelState) -> (bool, String) {
    let c = &wf.customs[i];
    let src = c.expression.source();
    let why = if c.description.is_empty() { String::new() } else { format!(" ({})", c.description) };
    let ctx = match cel.context(space) {
        Ok(ctx) => ctx,
        Err(e) => return (false, format!("`{src}` could not be evaluated: {e}")),
    };
    match c.expression.execute(ctx) {
        Ok(cel::Value::Bool(true)) => (true, format!("`{src}` is true{why}")),
        Ok(cel::Value::Bool(false)) => (false, format!("`{src}` is false{why}")),
        Ok(other) => {
            (false, format!("`{src}` returned a {} instead of a bool, which fails the gate", other.type_of()))
        }
        Err(e) => (false, format!("`{src}` could not be evaluated ({e}), which fails the gate")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::attest::{AttestationFact, AttestationResult};
    use crate::gates::{EXAMPLE_WORKFLOW, compile, parse_yaml};
    use chrono::{TimeDelta, TimeZone};
    use serde_json::json;

    const STAGING: usize = 1;
    const PROD: usize = 2;
    const RELEASER: &str = "9b2c0f3e-5d7a-4a61-8f0e-2b6d1c4e7a90";

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 10, 12, 0, 0).unwrap()
    }

    fn wf() -> CompiledWorkflow {
        compile(parse_yaml(EXAMPLE_WORKFLOW).unwrap()).unwrap()
    }

    fn wf_with_custom(expression: &str) -> CompiledWorkflow {
        let mut spec = parse_yaml(EXAMPLE_WORKFLOW).unwrap();
        spec.CustomPrerequisites[0].Expression = expression.into();
        compile(spec).unwrap()
    }

    fn approval(user: u128, can_approve: bool) -> AttestationFact {
        AttestationFact {
            AttestationID: Uuid::from_u128(0xa000 + user),
            UserID: Uuid::from_u128(user),
            UserName: String::new(),
            Type: "Approval".into(),
            Result: AttestationResult::Pass,
            CreatedAt: now() - TimeDelta::hours(2),
            ExpiresAt: None,
            Revoked: false,
            AttesterCanApprove: can_approve,
        }
    }

    /// A staging Space where every prod entry gate holds.
    fn staging(slug: &str) -> SpaceFacts {
        SpaceFacts {
            SpaceID: Uuid::from_u128(0x5000),
            Slug: slug.into(),
            Space: json!({"Slug": slug, "Labels": {"Stage": "staging"}, "Annotations": {}, "Replicas": 3}),
            Promoted: true,
            ValidationErrors: vec![],
            HasReleaseTarget: true,
            Released: true,
            Release: Some(json!({"ReleaseNum": 4, "Annotations": {"loadtest": "passed"}})),
            LiveStatus: Some(LiveFacts {
                Sync: "Synced".into(),
                Operation: "Succeeded".into(),
                Health: "Healthy".into(),
            }),
            Revisions: vec![RevisionFacts {
                UnitSlug: "web".into(),
                RevisionNum: 3,
                Authors: [Uuid::from_u128(1)].into(),
                Attestations: vec![approval(2, true), approval(3, true)],
            }],
        }
    }

    fn co() -> Value {
        json!({"Slug": "bump", "Labels": {"Risk": "low"}, "Version": 2})
    }

    /// (prerequisite, satisfied) pairs, in order.
    fn outcome(vs: &[Verdict]) -> Vec<(&str, bool)> {
        vs.iter().map(|v| (v.Prerequisite.as_str(), v.Satisfied)).collect()
    }

    fn only<'a>(vs: &'a [Verdict], name: &str) -> &'a Verdict {
        let found: Vec<&Verdict> = vs.iter().filter(|v| v.Prerequisite == name).collect();
        assert_eq!(found.len(), 1, "{vs:?}");
        found[0]
    }

    #[test]
    fn the_first_stage_is_never_evaluated() {
        assert!(evaluate_entry(&wf(), 0, &[], &co(), now()).is_empty());
        let mut not_taken = staging("s");
        not_taken.Promoted = false;
        assert!(evaluate_entry(&wf(), 0, &[not_taken], &co(), now()).is_empty());
    }

    #[test]
    fn promoted_comes_first_then_the_listed_gates_in_order() {
        let vs = evaluate_entry(&wf(), PROD, &[staging("staging-eu"), staging("staging-us")], &co(), now());
        let one = [
            ("Promoted", true),
            ("Released", true),
            ("Healthy", true),
            ("not-frozen", true),
            ("approved", true),
        ];
        assert_eq!(outcome(&vs), [one, one].concat());
        assert!(failing(&vs).is_empty());
        assert_eq!(vs[0].SpaceSlug, "staging-eu");
        assert_eq!(vs[5].SpaceSlug, "staging-us");
        // Every gate is still evaluated when the Space has not taken the change.
        let mut behind = staging("staging-eu");
        behind.Promoted = false;
        let vs = evaluate_entry(&wf(), PROD, &[behind], &co(), now());
        assert_eq!(vs.len(), 5);
        assert_eq!(outcome(&failing(&vs).into_iter().cloned().collect::<Vec<_>>()), [("Promoted", false)]);
        assert!(vs[0].Message.contains("ResolvedSpaceIDs"), "{}", vs[0]);
        assert_eq!(
            vs[0].to_string(),
            "Promoted on staging-eu: has not taken the change (it is not in the ChangeOrder's ResolvedSpaceIDs)"
        );
    }

    #[test]
    fn an_empty_previous_stage_fails_loudly() {
        let vs = evaluate_entry(&wf(), PROD, &[], &co(), now());
        assert_eq!(outcome(&vs), [("Promoted", false)]);
        assert!(vs[0].Message.contains("stage 'staging' selects no Space"), "{}", vs[0]);
        assert!(vs[0].SpaceID.is_nil() && vs[0].SpaceSlug.is_empty());
        let vs = evaluate_final(&wf(), &[], &co(), now());
        assert!(vs[0].Message.contains("stage 'prod' selects no Space"), "{}", vs[0]);
    }

    #[test]
    fn validated_names_the_units() {
        let mut s = staging("dev-1");
        let vs = evaluate_entry(&wf(), STAGING, &[s.clone()], &co(), now());
        assert_eq!(outcome(&vs), [("Promoted", true), ("Validated", true), ("Released", true)]);
        s.ValidationErrors =
            vec![UnitValidationError { UnitSlug: "web".into(), Message: "replicas must be > 0".into() }];
        s.HasReleaseTarget = false;
        let vs = evaluate_entry(&wf(), STAGING, &[s], &co(), now());
        assert_eq!(
            only(&vs, "Validated").Message,
            "1 Unit has validation errors at the end Tag: web: replicas must be > 0"
        );
        assert!(!only(&vs, "Released").Satisfied);
    }

    #[test]
    fn released_needs_a_target_and_a_release() {
        let mut s = staging("s");
        s.HasReleaseTarget = false;
        let v = only(&evaluate_entry(&wf(), PROD, &[s.clone()], &co(), now()), "Released").clone();
        assert!(!v.Satisfied && v.Message.contains("no release Target"), "{v}");
        s.HasReleaseTarget = true;
        s.Released = false;
        let v = only(&evaluate_entry(&wf(), PROD, &[s], &co(), now()), "Released").clone();
        assert!(!v.Satisfied && v.Message.contains("has not published a Release"), "{v}");
    }

    #[test]
    fn healthy_needs_synced_succeeded_healthy_and_implies_released() {
        let check = |s: SpaceFacts| only(&evaluate_entry(&wf(), PROD, &[s], &co(), now()), "Healthy").clone();
        let mut s = staging("s");
        s.HasReleaseTarget = false;
        assert!(check(s).Message.contains("can never be Healthy"));
        let mut s = staging("s");
        s.Released = false;
        let v = check(s);
        assert!(!v.Satisfied && v.Message.contains("Healthy implies Released"), "{v}");
        let mut s = staging("s");
        s.LiveStatus = None;
        assert!(check(s).Message.contains("no live status"));
        let mut s = staging("s");
        s.LiveStatus = Some(LiveFacts {
            Sync: "OutOfSync".into(),
            Operation: "Succeeded".into(),
            Health: String::new(),
        });
        let v = check(s);
        assert!(!v.Satisfied);
        assert_eq!(
            v.Message,
            "live status: Sync is OutOfSync (needs Synced), Health is not reported (needs Healthy)"
        );
        assert!(check(staging("s")).Satisfied);
    }

    #[test]
    fn custom_cel_true_false_non_bool_and_error() {
        let frozen = |value: &str| {
            let mut s = staging("s");
            s.Space["Annotations"] = json!({"code-freeze": value});
            s
        };
        let check = |wf: &CompiledWorkflow, s: SpaceFacts| {
            only(&evaluate_entry(wf, PROD, &[s], &co(), now()), "not-frozen").clone()
        };
        let v = check(&wf(), staging("s"));
        assert!(v.Satisfied, "{v}");
        assert!(v.Message.ends_with("is true (the space is not under a code freeze)"), "{v}");
        let v = check(&wf(), frozen("true"));
        assert!(!v.Satisfied);
        assert!(v.Message.ends_with("is false (the space is not under a code freeze)"), "{v}");
        assert!(check(&wf(), frozen("false")).Satisfied);
        let v = check(&wf_with_custom("cel:Space.Slug"), staging("s"));
        assert!(!v.Satisfied && v.Message.contains("returned a string instead of a bool"), "{v}");
        let v = check(&wf_with_custom("cel:Space.Annotations['code-freeze'] != 'true'"), staging("s"));
        assert!(!v.Satisfied && v.Message.contains("could not be evaluated"), "{v}");
        // Integers are signed, ChangeOrder is bound, and Release is the earliest Release.
        let wf = wf_with_custom(
            "cel:Space.Replicas + 1 == 4 && ChangeOrder.Labels.Risk == 'low' && ChangeOrder.Version - 3 < 0",
        );
        assert!(check(&wf, staging("s")).Satisfied);
        let wf = wf_with_custom("cel:Release != null && Release.Annotations.loadtest == 'passed'");
        assert!(check(&wf, staging("s")).Satisfied);
    }

    #[test]
    fn release_is_null_when_there_is_none() {
        let wf = wf_with_custom("cel:Release == null");
        let mut s = staging("s");
        s.Release = None;
        let vs = evaluate_entry(&wf, PROD, &[s, staging("t")], &co(), now());
        assert_eq!(
            outcome(&vs.into_iter().filter(|v| v.Prerequisite == "not-frozen").collect::<Vec<_>>()),
            [("not-frozen", true), ("not-frozen", false)]
        );
    }

    #[test]
    fn attestation_entry_gate_reads_the_space_revisions() {
        let mut s = staging("staging-eu");
        s.Revisions[0].Attestations[1].UserID = Uuid::from_u128(1); // the author
        let vs = evaluate_entry(&wf(), PROD, &[s], &co(), now());
        let v = only(&vs, "approved");
        assert!(!v.Satisfied);
        let author = Uuid::from_u128(1);
        assert_eq!(v.Message, format!("web#3 has 1 of 2 approvals (discarded: {author} wrote the change)"));
        assert_eq!(v.to_string(), format!("approved on staging-eu: {}", v.Message));
    }

    #[test]
    fn release_gates_use_the_release_prerequisites() {
        let wf = wf();
        assert!(evaluate_release(&wf, STAGING, &staging("s"), &co(), now()).is_empty());
        let releaser = Uuid::parse_str(RELEASER).unwrap();
        let mut s = staging("prod-eu");
        let vs = evaluate_release(&wf, PROD, &s, &co(), now());
        assert_eq!(outcome(&vs), [("release-approved", false)]);
        assert!(vs[0].Message.contains("is not one of the FromUserIDs"), "{}", vs[0]);
        let mut ok = approval(releaser.as_u128(), false);
        s.Revisions[0].Attestations.push(ok.clone());
        assert!(evaluate_release(&wf, PROD, &s, &co(), now())[0].Satisfied);
        ok.CreatedAt = now() - TimeDelta::hours(73);
        s.Revisions[0].Attestations = vec![ok];
        let v = &evaluate_release(&wf, PROD, &s, &co(), now())[0];
        assert!(!v.Satisfied && v.Message.contains("older than 72h"), "{v}");
    }

    #[test]
    fn final_evaluates_its_prerequisites_over_the_last_stage() {
        let mut s = staging("prod-eu");
        s.LiveStatus.as_mut().unwrap().Health = "Degraded".into();
        let vs = evaluate_final(&wf(), &[staging("prod-us"), s], &co(), now());
        assert_eq!(
            outcome(&vs),
            [
                ("Promoted", true),
                ("Released", true),
                ("Healthy", true),
                ("Promoted", true),
                ("Released", true),
                ("Healthy", false)
            ]
        );
        assert_eq!(failing(&vs)[0].SpaceSlug, "prod-eu");
    }

    #[test]
    fn verdicts_serialize_in_pascal_case() {
        let vs = evaluate_entry(&wf(), STAGING, &[staging("s")], &co(), now());
        let v = serde_json::to_value(&vs[0]).unwrap();
        assert_eq!(
            v,
            json!({"Prerequisite": "Promoted", "Satisfied": true, "Message": "has taken the change",
                   "SpaceID": Uuid::from_u128(0x5000), "SpaceSlug": "s"})
        );
    }
}
