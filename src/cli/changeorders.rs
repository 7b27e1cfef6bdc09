//! `changeflow changeorder …` and the ChangeOrder forms of `variant promote` / `variant demote`.

use super::client::{Client, enc};
use super::output::{self, Columns, Format};
use anyhow::{Result, bail};
use clap::Subcommand;
use serde_json::{Value, json};

const CHANGE_ORDER: Columns = &[
    ("SLUG", "/Slug"),
    ("TYPE", "/UpdateType"),
    ("STATE", "/State"),
    ("IN-SCOPE", "/InScopeSpaceIDs"),
    ("RESOLVED", "/ResolvedSpaceIDs"),
    ("RELEASED", "/ReleasedSpaceIDs"),
    ("ABORTED", "/AbortedReason"),
];
const PLAN: Columns =
    &[("SPACE", "/Space"), ("UNIT", "/Unit"), ("OUTCOME", "/Outcome"), ("DETAIL", "/Detail")];
const RESTORED: Columns = &[("UNIT", "/Unit"), ("OUTCOME", "/Outcome"), ("REVISION", "/RevisionNum")];

const WORKFLOW: Columns =
    &[("SLUG", "/Slug"), ("STAGES", "/Stages"), ("VERSION", "/Version"), ("ID", "/ChangeWorkflowID")];
const GATES: Columns = &[
    ("STAGE", "/Stage"),
    ("SPACE", "/SpaceSlug"),
    ("GATE", "/Prerequisite"),
    ("OK", "/Satisfied"),
    ("REASON", "/Message"),
];

#[derive(Debug, Subcommand)]
pub enum WorkflowCmd {
    /// Create a ChangeWorkflow from a YAML file (Stages, Final, CustomPrerequisites,
    /// AttestationPrerequisites). It is checked now: a bad selector, unknown prerequisite or CEL
    /// expression that does not compile is refused, naming the Stage and field.
    Create {
        slug: String,
        #[arg(long)]
        space: String,
        #[arg(long)]
        file: String,
        #[arg(long)]
        description: Option<String>,
    },
    /// Replace a ChangeWorkflow's definition (ChangeOrders created before keep their copy).
    Update {
        slug: String,
        #[arg(long)]
        space: String,
        #[arg(long)]
        file: String,
        #[arg(long)]
        version: Option<i64>,
    },
    Get {
        slug: String,
        #[arg(long)]
        space: String,
    },
    List {
        #[arg(long)]
        space: Option<String>,
        #[arg(long = "where")]
        where_: Option<String>,
    },
    Delete {
        slug: String,
        #[arg(long)]
        space: String,
    },
}

pub async fn run_workflow(c: &Client, out: Format, cmd: WorkflowCmd) -> Result<()> {
    let base = |space: &str| format!("/v1/spaces/{}/changeworkflows", enc(space));
    let read = |f: &str| super::commands::read_input(f);
    let v = match cmd {
        WorkflowCmd::Create { slug, space, file, description } => {
            let body = json!({"Slug": slug, "Definition": read(&file)?, "Description": description});
            c.post(&base(&space), &body).await?
        }
        WorkflowCmd::Update { slug, space, file, version } => {
            let body = json!({"Definition": read(&file)?, "Version": version});
            c.patch(&format!("{}/{}", base(&space), enc(&slug)), &body).await?
        }
        WorkflowCmd::Get { slug, space } => c.get(&format!("{}/{}", base(&space), enc(&slug))).await?,
        WorkflowCmd::List { space, where_ } => {
            let q = where_.map(|w| format!("?where={}", enc(&w))).unwrap_or_default();
            match space.as_deref() {
                Some(s) if s != "*" => c.get(&format!("{}{q}", base(s))).await?,
                _ => c.get(&format!("/v1/changeworkflows{q}")).await?,
            }
        }
        WorkflowCmd::Delete { slug, space } => {
            c.delete(&format!("{}/{}", base(&space), enc(&slug))).await?;
            eprintln!("deleted change workflow {space}/{slug}");
            return Ok(());
        }
    };
    output::print(&v, out, WORKFLOW);
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum ChangeorderCmd {
    /// Name a change in its base Space and derive, per Unit, the interval (start, end] to promote.
    Create {
        slug: String,
        /// The base Space, where the change was made.
        #[arg(long)]
        space: String,
        #[arg(long, default_value = "")]
        description: String,
        /// Where the change is headed (comma-separated or repeated). Default: wherever its Links reach.
        #[arg(long = "in-scope-space")]
        in_scope: Vec<String>,
        /// Select the Spaces in scope with a where expression (the server records the answer).
        #[arg(long)]
        where_space: Option<String>,
        /// Select them with a Filter over Spaces (space/slug), ANDed with --where-space.
        #[arg(long)]
        space_filter: Option<String>,
        /// UpgradeUnit (default), MergeUnits, or Invoke.
        #[arg(long, default_value = "UpgradeUnit")]
        update_type: String,
        /// Adopt this Tag's revisions as the end of the change (it is never written to).
        #[arg(long)]
        end_tag: Option<String>,
        /// Invoke: the Invocation to run in every Space in scope (space/slug).
        #[arg(long)]
        invocation: Option<String>,
        /// Invoke: a parameter value, K=V (repeatable); one set for every Space.
        #[arg(long = "param", value_parser = super::key_value)]
        params: Vec<(String, String)>,
        /// Invoke: which Units of each Space are covered (asked again on every read).
        #[arg(long)]
        where_unit: Option<String>,
        /// Invoke: a Filter over Units (space/slug).
        #[arg(long)]
        unit_filter: Option<String>,
        /// Promote under this ChangeWorkflow (space/slug): its definition is copied on, and
        /// without --in-scope-space the scope is every Space its Stages select.
        #[arg(long)]
        change_workflow: Option<String>,
    },
    /// Show a ChangeOrder with its derived State and Space sets.
    Get {
        slug: String,
        #[arg(long)]
        space: String,
    },
    /// List ChangeOrders, e.g. --where "State = 'InProgress'" or "LEN(ResolvedSpaceIDs) > 3".
    List {
        #[arg(long)]
        space: Option<String>,
        #[arg(long = "where")]
        where_: Option<String>,
    },
    /// Abort (--aborted-reason), change the scope, or take in Spaces that match since (--refresh-spaces).
    Update {
        slug: String,
        #[arg(long)]
        space: String,
        /// Abort: the change is not coming to the Spaces still waiting ("" un-aborts).
        #[arg(long)]
        aborted_reason: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[arg(long = "in-scope-space")]
        in_scope: Vec<String>,
        /// A new selection ("-" clears it).
        #[arg(long)]
        where_space: Option<String>,
        #[arg(long)]
        space_filter: Option<String>,
        /// Re-evaluate the selection now.
        #[arg(long)]
        refresh_spaces: bool,
    },
    /// Delete a ChangeOrder: it leaves every revision and its own Tags are deleted.
    Delete {
        slug: String,
        #[arg(long)]
        space: String,
    },
}

/// Splits `space/slug`.
pub fn split_ref(r: &str) -> Result<(&str, &str)> {
    match r.split_once('/') {
        Some((s, c)) if !s.is_empty() && !c.is_empty() => Ok((s, c)),
        _ => bail!("--change-order must be SPACE/SLUG, got '{r}'"),
    }
}

pub async fn run(c: &Client, out: Format, cmd: ChangeorderCmd) -> Result<()> {
    let base = |space: &str| format!("/v1/spaces/{}/changeorders", enc(space));
    let v = match cmd {
        ChangeorderCmd::Create {
            slug,
            space,
            description,
            in_scope,
            where_space,
            space_filter,
            update_type,
            end_tag,
            invocation,
            params,
            where_unit,
            unit_filter,
            change_workflow,
        } => {
            let params: serde_json::Map<String, Value> =
                params.into_iter().map(|(k, v)| (k, json!(v))).collect();
            let body = json!({"Slug": slug, "Description": description, "InScopeSpaces": in_scope,
                "WhereSpace": where_space.unwrap_or_default(), "SpaceFilter": space_filter, "UpdateType": update_type,
                "EndTag": end_tag, "Invocation": invocation, "Parameters": params,
                "WhereUnit": where_unit.unwrap_or_default(), "UnitFilter": unit_filter,
                "ChangeWorkflow": change_workflow});
            c.post(&base(&space), &body).await?
        }
        ChangeorderCmd::Get { slug, space } => c.get(&format!("{}/{}", base(&space), enc(&slug))).await?,
        ChangeorderCmd::List { space, where_ } => {
            let q = where_.map(|w| format!("?where={}", enc(&w))).unwrap_or_default();
            match space.as_deref() {
                Some(s) if s != "*" => c.get(&format!("{}{q}", base(s))).await?,
                _ => c.get(&format!("/v1/changeorders{q}")).await?,
            }
        }
        ChangeorderCmd::Update {
            slug,
            space,
            aborted_reason,
            description,
            in_scope,
            where_space,
            space_filter,
            refresh_spaces,
        } => {
            let mut body = json!({"RefreshSpaces": refresh_spaces});
            if let Some(r) = aborted_reason {
                body["AbortedReason"] = json!(r);
            }
            if let Some(d) = description {
                body["Description"] = json!(d);
            }
            if !in_scope.is_empty() {
                body["InScopeSpaces"] = json!(in_scope);
            }
            if let Some(w) = where_space {
                body["WhereSpace"] = json!(w);
            }
            if let Some(f) = space_filter {
                body["SpaceFilter"] = json!(f);
            }
            c.patch(&format!("{}/{}", base(&space), enc(&slug)), &body).await?
        }
        ChangeorderCmd::Delete { slug, space } => {
            c.delete(&format!("{}/{}", base(&space), enc(&slug))).await?;
            eprintln!("deleted change order {space}/{slug}");
            return Ok(());
        }
    };
    output::print(&v, out, CHANGE_ORDER);
    Ok(())
}

/// The ChangeOrder form of `variant promote`.
pub struct PromoteArgs {
    pub space: Option<String>,
    pub change_order: String,
    pub dry_run: bool,
    pub expected_plan: Option<String>,
    pub target_stage: Option<String>,
    pub force: bool,
    pub reason: Option<String>,
}

/// `variant promote [<space>] --change-order S/CO [--target-stage X] [--force --reason R] [--dry-run]`.
pub async fn promote(c: &Client, out: Format, a: PromoteArgs) -> Result<()> {
    let PromoteArgs { space, change_order, dry_run, expected_plan, target_stage, force, reason } = a;
    let (base, co) = split_ref(&change_order)?;
    let body = json!({"Space": space, "DryRun": dry_run, "ExpectedPlan": expected_plan,
                      "TargetStage": target_stage, "Force": force, "Reason": reason});
    let v = c.post(&format!("/v1/spaces/{}/changeorders/{}/promote", enc(base), enc(co)), &body).await?;
    if out != Format::Table {
        output::print(&v, out, PLAN);
        return Ok(());
    }
    let gates: Vec<Value> = v["Stages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|st| {
            st["Gates"].as_array().cloned().unwrap_or_default().into_iter().map(move |mut g| {
                g["Stage"] = st["Name"].clone();
                g
            })
        })
        .collect();
    if !gates.is_empty() {
        eprint!("{}", output::table(&gates, GATES));
    }
    for st in v["Stages"].as_array().into_iter().flatten().filter(|st| st["Forced"] == json!(true)) {
        eprintln!("stage {} entered by force past failing gates (recorded on the change order)", st["Name"]);
    }
    let mut rows = vec![];
    for s in v["Spaces"].as_array().into_iter().flatten() {
        if let Some(e) = s["Error"].as_str() {
            rows.push(json!({"Space": s["Space"], "Unit": "-", "Outcome": "Failed", "Detail": e}));
        }
        for u in s["Plan"]["Units"].as_array().into_iter().flatten() {
            let detail = match u["Outcome"].as_str() {
                Some("Upgrade") => format!("upstream ({}, {}]", u["From"], u["To"]),
                Some("Clone") => format!("clone at {}, then to {}", u["At"], u["To"]),
                Some("Mark") => format!("start tag on {}", u["Start"]),
                Some("Skip") => u["Reason"].as_str().unwrap_or_default().to_string(),
                _ => String::new(),
            };
            rows.push(
                json!({"Space": s["Space"], "Unit": u["Unit"], "Outcome": u["Outcome"], "Detail": detail}),
            );
        }
        if dry_run {
            eprintln!(
                "plan for {}: {}",
                s["Space"].as_str().unwrap_or(""),
                s["Plan"]["Digest"].as_str().unwrap_or("")
            );
        }
    }
    print!("{}", output::table(&rows, PLAN));
    let n = v["Spaces"].as_array().map_or(0, Vec::len);
    match (dry_run, v["Complete"].as_bool()) {
        (true, _) => {
            eprintln!("dry run: nothing written; pass --expected-plan DIGEST to apply exactly this plan")
        }
        (false, Some(true)) => {
            eprintln!("promoted {co} into {n} space(s)");
            if let Some(stage) = v["Stage"].as_str() {
                eprintln!("stage reached: {stage}");
            }
        }
        _ => bail!("promotion of {co} stopped: see the failed space above; run it again to finish"),
    }
    Ok(())
}

/// `variant demote <space> --change-order S/CO`.
pub async fn demote(c: &Client, out: Format, space: &str, change_order: &str) -> Result<()> {
    let (base, co) = split_ref(change_order)?;
    let v = c
        .post(&format!("/v1/spaces/{}/changeorders/{}/demote", enc(base), enc(co)), &json!({"Space": space}))
        .await?;
    output::print(&v, out, RESTORED);
    Ok(())
}
