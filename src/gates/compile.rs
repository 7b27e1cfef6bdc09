//! Compiling a ChangeWorkflow when it is written, so that a definition that could never be
//! enforced is refused then, naming the Stage and field at fault ([`WorkflowError`]).
//!
//! Compiling parses every Stage's `WhereSpace` over Spaces (refusing one that names
//! `Labels.Component`, which the server appends itself), resolves every prerequisite name to a
//! gate, compiles each custom prerequisite's CEL once, and applies the attestation defaults
//! (Type `Approval`, Count 0 meaning 1, MaxAge parsed). Prerequisite names are unique across
//! built-in, custom and attestation prerequisites and may not shadow a built-in in any letter
//! case; the built-in `Promoted` is always checked first and may not be listed. A Stage may not
//! be called `Completed`, the word a ChangeOrder's Stage reads once Final holds.

use std::collections::BTreeSet;

use chrono::TimeDelta;
use uuid::Uuid;

use super::attest::Requirement;
use super::expr::CelExpression;
use super::workflow::{AttestationPrerequisite, ChangeWorkflowSpec, StageSpec, WorkflowError};
use crate::query::{WhereExpr, attrs};

/// The implicit gate: the Space has taken the change. Always checked, never listed.
pub const PROMOTED: &str = "Promoted";
/// Built-in prerequisites a Stage or Final may list.
pub const BUILT_IN: [&str; 3] = ["Validated", "Released", "Healthy"];
/// What a ChangeOrder's Stage reads once Final holds; no Stage may be named so.
pub const COMPLETED: &str = "Completed";

/// A prerequisite name resolved when the workflow is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    Validated,
    Released,
    Healthy,
    /// Index into the custom prerequisites.
    Custom(usize),
    /// Index into the attestation requirements.
    Attestation(usize),
}

/// Which facts a set of gates reads beyond `Promoted` (which comes with the ChangeOrder's view):
/// the revisions the change produced (Validated, attestations) and the Releases (Released,
/// Healthy, and CEL expressions, which may read `Release`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactNeeds {
    pub revisions: bool,
    pub releases: bool,
}

impl FactNeeds {
    pub const ALL: FactNeeds = FactNeeds { revisions: true, releases: true };

    pub(crate) fn of(gates: &[Gate]) -> FactNeeds {
        FactNeeds {
            revisions: gates.iter().any(|g| matches!(g, Gate::Validated | Gate::Attestation(_))),
            releases: gates.iter().any(|g| matches!(g, Gate::Released | Gate::Healthy | Gate::Custom(_))),
        }
    }
}

/// A compiled custom prerequisite.
#[derive(Debug, Clone)]
pub(crate) struct CustomGate {
    pub name: String,
    pub description: String,
    pub expression: CelExpression,
}

/// One Stage after compiling.
#[derive(Debug, Clone)]
pub struct CompiledStage {
    spec: StageSpec,
    where_space: WhereExpr,
    pub(crate) entry: Vec<Gate>,
    /// Indexes into the attestation requirements.
    pub(crate) release: Vec<usize>,
}

impl CompiledStage {
    /// The Stage's Name.
    pub fn name(&self) -> &str {
        &self.spec.Name
    }

    /// The Stage's selector over Spaces (without the component, which the caller appends).
    pub fn where_space(&self) -> &WhereExpr {
        &self.where_space
    }

    /// The Stage as written.
    pub fn spec(&self) -> &StageSpec {
        &self.spec
    }
}

/// A workflow checked and compiled once, shared (`Send + Sync`) by every evaluation.
#[derive(Debug, Clone)]
pub struct CompiledWorkflow {
    spec: ChangeWorkflowSpec,
    stages: Vec<CompiledStage>,
    pub(crate) final_gates: Vec<Gate>,
    pub(crate) customs: Vec<CustomGate>,
    requirements: Vec<Requirement>,
}

impl CompiledWorkflow {
    /// The definition as written.
    pub fn spec(&self) -> &ChangeWorkflowSpec {
        &self.spec
    }

    /// The Stages, in order.
    pub fn stages(&self) -> &[CompiledStage] {
        &self.stages
    }

    /// The position of the Stage called `name`.
    /// The facts Stage `k`'s entry gates read.
    pub fn entry_needs(&self, k: usize) -> FactNeeds {
        self.stages.get(k).map_or(FactNeeds::ALL, |s| FactNeeds::of(&s.entry))
    }

    pub fn stage_index(&self, name: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.name() == name)
    }

    /// The attestation requirements, in declaration order, with defaults applied.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    pub(crate) fn gate_name(&self, gate: Gate) -> &str {
        match gate {
            Gate::Validated => BUILT_IN[0],
            Gate::Released => BUILT_IN[1],
            Gate::Healthy => BUILT_IN[2],
            Gate::Custom(i) => &self.customs[i].name,
            Gate::Attestation(i) => &self.requirements[i].name,
        }
    }
}

/// Checks `spec` and compiles its selectors, gates and expressions.
pub fn compile(spec: ChangeWorkflowSpec) -> Result<CompiledWorkflow, WorkflowError> {
    if spec.Stages.is_empty() {
        let msg = "a ChangeWorkflow needs at least one Stage".to_string();
        return Err(WorkflowError::new(None, "Stages", "", msg));
    }
    let declared = check_declared_names(&spec)?;
    let mut customs = Vec::new();
    for (i, c) in spec.CustomPrerequisites.iter().enumerate() {
        let field = format!("CustomPrerequisites[{i}].Expression");
        let expression = CelExpression::compile(&c.Expression)
            .map_err(|m| WorkflowError::new(None, field, &c.Expression, format!("'{}': {m}", c.Name)))?;
        customs.push(CustomGate { name: c.Name.clone(), description: c.Description.clone(), expression });
    }
    let requirements = spec
        .AttestationPrerequisites
        .iter()
        .enumerate()
        .map(|(i, a)| requirement(i, a))
        .collect::<Result<Vec<_>, _>>()?;
    let space = attrs::entity("Space").expect("the query module knows Spaces");
    let mut stages = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, s) in spec.Stages.iter().enumerate() {
        let at = |f: &str| format!("Stages[{i}].{f}");
        let stage = Some(s.Name.as_str()).filter(|n| !n.is_empty());
        if s.Name.trim().is_empty() {
            return Err(WorkflowError::new(None, at("Name"), &s.Name, "a Stage needs a Name".to_string()));
        }
        if let Some(j) = seen.iter().position(|n| *n == s.Name) {
            let msg = format!("'{}' names two Stages (also Stages[{j}])", s.Name);
            return Err(WorkflowError::new(stage, at("Name"), &s.Name, msg));
        }
        if s.Name == COMPLETED {
            let msg = format!(
                "'{COMPLETED}' is what a ChangeOrder's Stage reads once Final holds; pick another name"
            );
            return Err(WorkflowError::new(stage, at("Name"), &s.Name, msg));
        }
        seen.push(&s.Name);
        let where_space = WhereExpr::parse(&s.WhereSpace, space)
            .map_err(|e| WorkflowError::new(stage, at("WhereSpace"), &s.WhereSpace, e.to_string()))?;
        if attribute_paths(&s.WhereSpace).iter().any(|p| p == "Labels.Component") {
            let msg = "names Labels.Component, which is refused: every Stage already selects only the \
                       component of the ChangeOrder's Space, so restating it changes nothing or selects no Space"
                .to_string();
            return Err(WorkflowError::new(stage, at("WhereSpace"), &s.WhereSpace, msg));
        }
        let entry = resolve_list(&s.Prerequisites, &declared, &spec, stage, &at("Prerequisites"))?;
        let release = resolve_release(s, &declared, &spec, stage, &at("ReleasePrerequisites"))?;
        stages.push(CompiledStage { spec: s.clone(), where_space, entry, release });
    }
    let final_gates = resolve_list(&spec.Final.Prerequisites, &declared, &spec, None, "Final.Prerequisites")?;
    Ok(CompiledWorkflow { spec, stages, final_gates, customs, requirements })
}

/// Checks declared names (non-empty, unique, not a built-in) and returns them in order.
fn check_declared_names(spec: &ChangeWorkflowSpec) -> Result<Vec<String>, WorkflowError> {
    let custom = spec
        .CustomPrerequisites
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("CustomPrerequisites[{i}]"), &c.Name));
    let attest = spec
        .AttestationPrerequisites
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("AttestationPrerequisites[{i}]"), &a.Name));
    let mut seen: Vec<(String, String)> = Vec::new();
    for (at, name) in custom.chain(attest) {
        let field = format!("{at}.Name");
        if name.trim().is_empty() {
            return Err(WorkflowError::new(None, field, name, "a prerequisite needs a Name".to_string()));
        }
        if let Some(b) = BUILT_IN.iter().chain([&PROMOTED]).find(|b| b.eq_ignore_ascii_case(name)) {
            let msg = format!("'{name}' would shadow the built-in prerequisite '{b}'");
            return Err(WorkflowError::new(None, field, name, msg));
        }
        if let Some((other, _)) = seen.iter().find(|(_, n)| n == name) {
            let msg = format!("'{name}' is declared twice (also {other}); prerequisite names are unique");
            return Err(WorkflowError::new(None, field, name, msg));
        }
        seen.push((at, name.clone()));
    }
    Ok(seen.into_iter().map(|(_, n)| n).collect())
}

fn requirement(i: usize, a: &AttestationPrerequisite) -> Result<Requirement, WorkflowError> {
    let at = |f: &str| format!("AttestationPrerequisites[{i}].{f}");
    let name = &a.Name;
    if a.Count < 0 {
        let msg = format!("'{name}': Count must be 0 or more (0 means 1), not {}", a.Count);
        return Err(WorkflowError::new(None, at("Count"), a.Count.to_string(), msg));
    }
    let reserved = "is reserved and refused until Attestations record the groups of their attesters";
    if !a.FromGroupIDs.is_empty() {
        let ids: Vec<String> = a.FromGroupIDs.iter().map(Uuid::to_string).collect();
        let msg = format!("'{name}': FromGroupIDs {reserved}");
        return Err(WorkflowError::new(None, at("FromGroupIDs"), ids.join(", "), msg));
    }
    if a.DistinctGroups {
        let msg = format!("'{name}': DistinctGroups {reserved}");
        return Err(WorkflowError::new(None, at("DistinctGroups"), "true", msg));
    }
    let max_age = match a.MaxAge.trim() {
        "" => None,
        text => Some(parse_duration(text).map_err(|m| {
            WorkflowError::new(None, at("MaxAge"), &a.MaxAge, format!("'{name}': MaxAge {m}"))
        })?),
    };
    let count = u32::try_from(a.Count.max(1)).map_err(|_| {
        WorkflowError::new(None, at("Count"), a.Count.to_string(), format!("'{name}': Count is too large"))
    })?;
    Ok(Requirement {
        name: name.clone(),
        kind: if a.Type.trim().is_empty() { "Approval".to_string() } else { a.Type.clone() },
        count,
        from_user_ids: a.FromUserIDs.iter().copied().collect(),
        allow_authors: a.AllowAuthors,
        max_age,
        max_age_text: a.MaxAge.trim().to_string(),
        ignore_fail: a.IgnoreFail,
    })
}

fn unknown(name: &str, declared: &[String]) -> String {
    let listed = if declared.is_empty() { "none".to_string() } else { declared.join(", ") };
    let hint = match BUILT_IN.iter().chain([&PROMOTED]).find(|b| b.eq_ignore_ascii_case(name)) {
        Some(b) => format!("; did you mean '{b}'?"),
        None => String::new(),
    };
    format!("unknown prerequisite '{name}' (built in: {}; declared: {listed}){hint}", BUILT_IN.join(", "))
}

fn resolve(name: &str, declared: &[String], spec: &ChangeWorkflowSpec) -> Result<Gate, String> {
    if let Some(i) = BUILT_IN.iter().position(|b| *b == name) {
        return Ok([Gate::Validated, Gate::Released, Gate::Healthy][i]);
    }
    if name == PROMOTED {
        return Err(format!("'{PROMOTED}' is always checked first and may not be listed"));
    }
    if let Some(i) = spec.CustomPrerequisites.iter().position(|c| c.Name == name) {
        return Ok(Gate::Custom(i));
    }
    match spec.AttestationPrerequisites.iter().position(|a| a.Name == name) {
        Some(i) => Ok(Gate::Attestation(i)),
        None => Err(unknown(name, declared)),
    }
}

fn resolve_list(
    names: &[String],
    declared: &[String],
    spec: &ChangeWorkflowSpec,
    stage: Option<&str>,
    field: &str,
) -> Result<Vec<Gate>, WorkflowError> {
    let mut seen = BTreeSet::new();
    names
        .iter()
        .map(|name| {
            if !seen.insert(name) {
                return Err(WorkflowError::new(stage, field, name, format!("'{name}' is listed twice")));
            }
            resolve(name, declared, spec).map_err(|m| WorkflowError::new(stage, field, name, m))
        })
        .collect()
}

fn resolve_release(
    s: &StageSpec,
    declared: &[String],
    spec: &ChangeWorkflowSpec,
    stage: Option<&str>,
    field: &str,
) -> Result<Vec<usize>, WorkflowError> {
    let gates = resolve_list(&s.ReleasePrerequisites, declared, spec, stage, field)?;
    let attestations: Vec<&str> = spec.AttestationPrerequisites.iter().map(|a| a.Name.as_str()).collect();
    gates
        .into_iter()
        .zip(&s.ReleasePrerequisites)
        .map(|(gate, name)| match gate {
            Gate::Attestation(i) => Ok(i),
            _ => {
                let what = if matches!(gate, Gate::Custom(_)) { "a custom prerequisite" } else { "built in" };
                let listed = if attestations.is_empty() { "none".to_string() } else { attestations.join(", ") };
                let msg = format!(
                    "'{name}' is {what}, but ReleasePrerequisites may name only attestation prerequisites \
                     (declared: {listed}), since a publish cannot read the state of a Stage the change has not \
                     moved through yet"
                );
                Err(WorkflowError::new(stage, field, name, msg))
            }
        })
        .collect()
}

/// Parses a duration such as `72h`, `30m`, `7d` or `1h30m` (units s, m, h, d, w).
pub fn parse_duration(text: &str) -> Result<TimeDelta, String> {
    const HINT: &str = "write a number and a unit (s, m, h, d or w), e.g. 72h or 1h30m";
    let t = text.trim();
    if t.is_empty() {
        return Err(format!("is empty; {HINT}"));
    }
    let (mut seconds, mut digits) = (0i64, String::new());
    for c in t.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(format!("'{t}' has an unknown unit '{c}'; {HINT}")),
        };
        if digits.is_empty() {
            return Err(format!("'{t}' has a unit '{c}' without a number; {HINT}"));
        }
        seconds = digits
            .parse::<i64>()
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .and_then(|n| seconds.checked_add(n))
            .filter(|&n| n <= 100 * 366 * 86_400)
            .ok_or_else(|| format!("'{t}' is longer than a century"))?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(format!("'{t}' ends with a number without a unit; {HINT}"));
    }
    if seconds == 0 {
        return Err(format!("'{t}' is zero; an attestation could never be young enough"));
    }
    Ok(TimeDelta::seconds(seconds))
}

/// Attribute paths of an expression that already parsed: every identifier outside string
/// literals (keywords such as `AND`, `IN`, `LEN`, `NULL` included, which are never paths).
fn attribute_paths(src: &str) -> Vec<String> {
    let chars: Vec<char> = src.chars().collect();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // A string literal; `''` inside it is an escaped quote.
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' && chars.get(i + 1) == Some(&'\'') {
                    i += 2;
                } else if chars[i] == '\'' {
                    break;
                } else {
                    i += 1;
                }
            }
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_.-/*".contains(chars[i])) {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gates::EXAMPLE_WORKFLOW;
    use crate::gates::workflow::{from_json, parse_yaml};

    pub(crate) fn example() -> ChangeWorkflowSpec {
        parse_yaml(EXAMPLE_WORKFLOW).unwrap_or_else(|e| panic!("{e}"))
    }

    pub(crate) fn refused(spec: ChangeWorkflowSpec) -> WorkflowError {
        compile(spec).expect_err("the workflow should be refused")
    }

    pub(crate) fn refused_yaml(yaml: &str) -> WorkflowError {
        match parse_yaml(yaml) {
            Ok(spec) => refused(spec),
            Err(e) => e,
        }
    }

    /// Asserts the error names `stage` and `field` and its message contains each of `words`.
    pub(crate) fn names(e: &WorkflowError, stage: Option<&str>, field: &str, words: &[&str]) {
        assert_eq!(e.stage.as_deref(), stage, "{e}");
        assert_eq!(e.field, field, "{e}");
        for w in words {
            assert!(e.message.contains(w), "{w:?} not in: {e}");
        }
    }

    #[test]
    fn the_seed_example_compiles() {
        let spec = example();
        assert_eq!(spec.Stages.len(), 3);
        assert_eq!(spec.AttestationPrerequisites[0].Type, "Approval");
        assert_eq!(spec.AttestationPrerequisites[0].Count, 2);
        assert_eq!(spec.AttestationPrerequisites[1].Count, 1);
        let wf = compile(spec.clone()).unwrap();
        assert_eq!(wf.spec(), &spec);
        assert_eq!(
            wf.stages().iter().map(CompiledStage::name).collect::<Vec<_>>(),
            ["dev", "staging", "prod"]
        );
        assert_eq!((wf.stage_index("prod"), wf.stage_index("qa")), (Some(2), None));
        let prod = &wf.stages()[2];
        assert_eq!(prod.where_space().as_str(), "Labels.Stage = 'prod'");
        assert!(prod.where_space().matches(&serde_json::json!({"Labels": {"Stage": "prod"}})));
        let names: Vec<&str> = prod.entry.iter().map(|g| wf.gate_name(*g)).collect();
        assert_eq!(names, ["Released", "Healthy", "not-frozen", "approved"]);
        assert_eq!(prod.release, [1]);
        let r = &wf.requirements()[1];
        assert_eq!((r.count, r.max_age, r.from_user_ids.len()), (1, Some(TimeDelta::hours(72)), 1));
        // Round trip: what is serialized reads back the same.
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(from_json(json).unwrap(), spec);
        fn shared<T: Send + Sync>() {}
        shared::<CompiledWorkflow>();
    }

    #[test]
    fn refuses_no_stages_and_bad_stage_names() {
        names(&refused(ChangeWorkflowSpec::default()), None, "Stages", &["at least one Stage"]);
        let mut spec = example();
        spec.Stages[2].Name = "staging".into();
        names(&refused(spec), Some("staging"), "Stages[2].Name", &["two Stages", "Stages[1]"]);
        let mut spec = example();
        spec.Stages[0].Name = String::new();
        names(&refused(spec), None, "Stages[0].Name", &["needs a Name"]);
        let mut spec = example();
        spec.Stages[2].Name = "Completed".into();
        names(&refused(spec), Some("Completed"), "Stages[2].Name", &["Final holds"]);
    }

    #[test]
    fn refuses_invalid_where_space_and_labels_component() {
        let mut spec = example();
        spec.Stages[1].WhereSpace = "Labels.Stage = ".into();
        let e = refused(spec);
        names(&e, Some("staging"), "Stages[1].WhereSpace", &["invalid where expression"]);
        assert_eq!(e.value, "Labels.Stage = ");
        let mut spec = example();
        spec.Stages[1].WhereSpace = "Lables.Stage = 'staging'".into();
        names(&refused(spec), Some("staging"), "Stages[1].WhereSpace", &["unknown attribute 'Lables'"]);
        for src in [
            "Labels.Component = 'shop'",
            "Labels.Stage = 'prod' AND Labels.Component IN ('shop', 'cart')",
            "LEN(Labels.Component) > 0",
            "Labels.Stage = Labels.Component",
            "Labels.Component IS NULL",
        ] {
            let mut spec = example();
            spec.Stages[2].WhereSpace = src.into();
            names(&refused(spec), Some("prod"), "Stages[2].WhereSpace", &["Labels.Component"]);
        }
        // Only attribute paths count: a literal, another label or a longer key is fine.
        for src in [
            "Labels.Stage = 'Labels.Component'",
            "Slug = 'it''s Labels.Component'",
            "Labels.component = 'shop'",
            "Labels.Component.team = 'shop'",
            "",
        ] {
            let mut spec = example();
            spec.Stages[2].WhereSpace = src.into();
            compile(spec).unwrap_or_else(|e| panic!("{src}: {e}"));
        }
    }

    #[test]
    fn refuses_unknown_promoted_duplicate_and_non_attestation_release_prerequisites() {
        let mut spec = example();
        spec.Stages[1].Prerequisites.push("Promoted".into());
        names(&refused(spec), Some("staging"), "Stages[1].Prerequisites", &["always checked first"]);
        let mut spec = example();
        spec.Stages[1].Prerequisites.push("Released".into());
        names(&refused(spec), Some("staging"), "Stages[1].Prerequisites", &["'Released' is listed twice"]);
        let mut spec = example();
        spec.Stages[2].ReleasePrerequisites.push("Released".into());
        names(
            &refused(spec),
            Some("prod"),
            "Stages[2].ReleasePrerequisites",
            &["'Released' is built in", "only attestation prerequisites"],
        );
        let mut spec = example();
        spec.Stages[0].ReleasePrerequisites.push("not-frozen".into());
        names(&refused(spec), Some("dev"), "Stages[0].ReleasePrerequisites", &["custom prerequisite"]);
        let mut spec = example();
        spec.Stages[0].ReleasePrerequisites.push("signed-off".into());
        names(
            &refused(spec),
            Some("dev"),
            "Stages[0].ReleasePrerequisites",
            &["unknown prerequisite 'signed-off'"],
        );
    }

    #[test]
    fn refuses_duplicate_and_shadowing_declarations() {
        let mut spec = example();
        spec.AttestationPrerequisites[0].Name = "not-frozen".into();
        let e = refused(spec);
        names(&e, None, "AttestationPrerequisites[0].Name", &["declared twice", "CustomPrerequisites[0]"]);
        for builtin in ["Healthy", "validated", "Promoted"] {
            let mut spec = example();
            spec.CustomPrerequisites[0].Name = builtin.into();
            names(&refused(spec), None, "CustomPrerequisites[0].Name", &["shadow the built-in"]);
        }
        let mut spec = example();
        spec.AttestationPrerequisites[1].Name = " ".into();
        names(&refused(spec), None, "AttestationPrerequisites[1].Name", &["needs a Name"]);
    }

    #[test]
    fn refuses_bad_cel() {
        let cases = [
            ("Space.Slug != 'x'", "must start with 'cel:'"),
            ("cel:Space.Annotations[", "not a valid CEL expression"),
            ("cel:Spaec.Slug != 'x'", "'Spaec'"),
        ];
        for (expr, words) in cases {
            let mut spec = example();
            spec.CustomPrerequisites[0].Expression = expr.into();
            let e = refused(spec);
            names(&e, None, "CustomPrerequisites[0].Expression", &["'not-frozen'", words]);
            assert_eq!(e.value, expr);
        }
    }

    #[test]
    fn refuses_bad_attestation_fields() {
        let cases: [(&str, &str, &[&str]); 5] = [
            ("Count: -1", "Count", &["0 or more"]),
            ("FromGroupIDs: [9b2c0f3e-5d7a-4a61-8f0e-2b6d1c4e7a91]", "FromGroupIDs", &["reserved"]),
            ("DistinctGroups: true", "DistinctGroups", &["reserved"]),
            ("MaxAge: 72x", "MaxAge", &["unknown unit 'x'"]),
            ("MaxAge: 0h", "MaxAge", &["zero"]),
        ];
        for (line, field, words) in cases {
            let yaml = format!(
                "Stages: [{{Name: a}}, {{Name: b, Prerequisites: [ok]}}]\nAttestationPrerequisites:\n  - Name: ok\n    {line}\n"
            );
            let e = refused_yaml(&yaml);
            names(&e, None, &format!("AttestationPrerequisites[0].{field}"), words);
            assert!(e.message.starts_with("'ok': "), "{e}");
        }
        let spec =
            parse_yaml("Stages: [{Name: a}]\nAttestationPrerequisites: [{Name: ok, Count: 0, Type: ''}]")
                .unwrap();
        let wf = compile(spec).unwrap();
        let r = &wf.requirements()[0];
        assert_eq!((r.count, r.kind.as_str(), r.max_age), (1, "Approval", None));
    }

    #[test]
    fn durations() {
        let ok = [
            ("72h", 72 * 3600),
            ("30m", 1800),
            ("7d", 7 * 86_400),
            ("1h30m", 5400),
            ("90s", 90),
            ("2w", 1_209_600),
        ];
        for (text, secs) in ok {
            assert_eq!(parse_duration(text), Ok(TimeDelta::seconds(secs)), "{text}");
        }
        for (text, words) in [
            ("", "empty"),
            ("72", "without a unit"),
            ("h", "without a number"),
            ("5ms", "without a number"),
            ("1y", "unknown unit 'y'"),
            ("999999999999d", "century"),
        ] {
            let e = parse_duration(text).unwrap_err();
            assert!(e.contains(words), "{text}: {e}");
        }
    }

    #[test]
    fn attribute_paths_skip_literals() {
        assert_eq!(
            attribute_paths("Labels.Stage = 'a ''Labels.Component'' b' AND LEN(Labels.x-y) > -1"),
            ["Labels.Stage", "AND", "LEN", "Labels.x-y"]
        );
    }
}
