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
        } => {
            let params: serde_json::Map<String, Value> =
                params.into_iter().map(|(k, v)| (k, json!(v))).collect();
            let body = json!({"Slug": slug, "Description": description, "InScopeSpaces": in_scope,
                "WhereSpace": where_space.unwrap_or_default(), "SpaceFilter": space_filter, "UpdateType": update_type,
                "EndTag": end_tag, "Invocation": invocation, "Parameters": params,
                "WhereUnit": where_unit.unwrap_or_default(), "UnitFilter": unit_filter});
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

/// `variant promote [<space>] --change-order S/CO [--dry-run] [--expected-plan D]`.
pub async fn promote(
    c: &Client,
    out: Format,
    space: Option<String>,
    change_order: &str,
    dry_run: bool,
    expected_plan: Option<String>,
) -> Result<()> {
    let (base, co) = split_ref(change_order)?;
    let body = json!({"Space": space, "DryRun": dry_run, "ExpectedPlan": expected_plan});
    let v = c.post(&format!("/v1/spaces/{}/changeorders/{}/promote", enc(base), enc(co)), &body).await?;
    if out != Format::Table {
        output::print(&v, out, PLAN);
        return Ok(());
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
        (false, Some(true)) => eprintln!("promoted {co} into {n} space(s)"),
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
