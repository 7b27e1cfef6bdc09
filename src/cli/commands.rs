//! The entity commands: each builds a request, sends it, prints the answer.

use super::client::{Client, enc};
use super::output::{self, Columns, Format};
use super::{Command, key_value};
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};
use std::io::Read;

/// Reads a file, or stdin for `-`.
pub(super) fn read_input(path: &str) -> Result<String> {
    if path == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("reading stdin")?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading {path}"))
    }
}

fn map(pairs: &[(String, String)]) -> Value {
    Value::Object(pairs.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<Map<_, _>>())
}

#[derive(Debug, Args)]
pub struct WhereArg {
    /// Where expression, e.g. "Labels.Stage = 'prod' AND Slug LIKE 'web%'".
    #[arg(long = "where")]
    pub where_: Option<String>,
}

impl WhereArg {
    fn query(&self) -> String {
        self.where_.as_deref().map(|w| format!("?where={}", enc(w))).unwrap_or_default()
    }
}

#[derive(Debug, Subcommand)]
pub enum SpaceCmd {
    /// Create a Space.
    Create {
        slug: String,
        #[arg(long = "label", value_parser = key_value)]
        labels: Vec<(String, String)>,
        #[arg(long = "annotation", value_parser = key_value)]
        annotations: Vec<(String, String)>,
    },
    /// List Spaces.
    List(WhereArg),
    /// Show one Space.
    Get { slug: String },
    /// Change labels, annotations or the release Target (an empty value removes a label).
    Update {
        slug: String,
        #[arg(long = "label", value_parser = key_value)]
        labels: Vec<(String, String)>,
        #[arg(long = "annotation", value_parser = key_value)]
        annotations: Vec<(String, String)>,
        /// Target as space/slug ("" clears it).
        #[arg(long)]
        release_target: Option<String>,
        /// The Version you read; refused if the Space changed since.
        #[arg(long)]
        version: Option<i64>,
    },
    /// Delete an empty Space.
    Delete { slug: String },
}

#[derive(Debug, Subcommand)]
pub enum UnitCmd {
    /// Create a Unit from a YAML file (or - for stdin).
    Create {
        slug: String,
        #[arg(long)]
        space: String,
        #[arg(long)]
        file: String,
        #[arg(long, default_value = "Kubernetes/YAML")]
        toolchain: String,
        #[arg(long = "label", value_parser = key_value)]
        labels: Vec<(String, String)>,
        #[arg(long)]
        change_desc: Option<String>,
    },
    /// Replace a Unit's data (--file), or merge its upstream's new revisions (--upgrade).
    Update {
        slug: String,
        #[arg(long)]
        space: String,
        /// New data (YAML file, or - for stdin).
        #[arg(long, conflicts_with = "upgrade")]
        file: Option<String>,
        #[arg(long)]
        change_desc: Option<String>,
        /// Mark every path this change writes as a local override merges must not overwrite.
        #[arg(long, requires = "file")]
        protect: bool,
        /// Merge the upstream's revisions after the link's cursor.
        #[arg(long)]
        upgrade: bool,
        /// With --upgrade: one revision for the whole range.
        #[arg(long, requires = "upgrade")]
        squash: bool,
        /// With --upgrade: merge through this (MergeUnits) link.
        #[arg(long, requires = "upgrade")]
        link: Option<String>,
        /// With --upgrade: stop at this upstream revision.
        #[arg(long, requires = "upgrade")]
        to_revision: Option<i64>,
        #[arg(long = "label", value_parser = key_value)]
        labels: Vec<(String, String)>,
        /// The Version you read; refused if the Unit changed since.
        #[arg(long)]
        version: Option<i64>,
    },
    /// Show one Unit.
    Get {
        slug: String,
        #[arg(long)]
        space: String,
    },
    /// List Units of a Space (or every Space: omit --space or pass '*').
    List {
        #[arg(long)]
        space: Option<String>,
        #[command(flatten)]
        where_: WhereArg,
    },
    /// Print a Unit's data (head, or --revision N).
    Data {
        slug: String,
        #[arg(long)]
        space: String,
        #[arg(long)]
        revision: Option<i64>,
    },
    /// List what merges withheld from a Unit.
    Conflicts {
        slug: String,
        #[arg(long)]
        space: String,
    },
    /// Delete a Unit and its revisions.
    Delete {
        slug: String,
        #[arg(long)]
        space: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum RevisionCmd {
    /// List a Unit's revisions.
    List {
        #[arg(long)]
        space: String,
        #[arg(long)]
        unit: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum VariantCmd {
    /// Clone a Space and every Unit, each linked to its upstream.
    Create {
        new_space: String,
        #[arg(long)]
        from: String,
        /// Labels overriding the upstream's.
        #[arg(long = "label", value_parser = key_value)]
        labels: Vec<(String, String)>,
        #[arg(long = "annotation", value_parser = key_value)]
        annotations: Vec<(String, String)>,
    },
    /// Without --change-order: bring a variant up to its upstream (upgrade Units behind it,
    /// clone the ones it lacks). With it: queue a Promotion of that change into the Space (or,
    /// with no Space, into every Space of each Stage up to --target-stage, wave by wave; without
    /// a workflow, hop by hop) and print its ID; --wait follows it with progress bars. Closed
    /// entry gates hold the Stage's Spaces (re-checked on every retry) until they open.
    /// --dry-run shows the plan and every gate at once, writing nothing.
    Promote {
        space: Option<String>,
        #[arg(long, requires = "space")]
        squash: bool,
        /// SPACE/SLUG of the ChangeOrder to promote.
        #[arg(long)]
        change_order: Option<String>,
        /// Show the plan and its digest; write nothing.
        #[arg(long, requires = "change_order")]
        dry_run: bool,
        /// Apply only if the plan still has this digest (from --dry-run); otherwise HTTP 412.
        #[arg(long, requires = "change_order")]
        expected_plan: Option<String>,
        /// Under a workflow: promote every Stage up to this one, each behind its entry gates
        /// (default: the next Stage not yet reached).
        #[arg(long, requires = "change_order")]
        target_stage: Option<String>,
        /// Promote past failing entry gates (needs Manage on the ChangeOrder's Space); recorded.
        #[arg(long, requires = "reason")]
        force: bool,
        /// Why a forced promotion is needed.
        #[arg(long, requires = "force")]
        reason: Option<String>,
        /// Follow the Promotion until it ends: a progress bar per Stage, then the Spaces table.
        #[arg(long, requires = "change_order")]
        wait: bool,
        #[command(flatten)]
        rollout: super::promotions::RolloutArgs,
    },
    /// Undo an aborted ChangeOrder in one Space, in one step.
    Demote {
        space: String,
        /// SPACE/SLUG of the ChangeOrder.
        #[arg(long)]
        change_order: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum LinkCmd {
    /// Create a MergeUnits link from a Unit to an upstream Unit (space/unit).
    Create {
        slug: String,
        #[arg(long)]
        space: String,
        #[arg(long)]
        from_unit: String,
        #[arg(long)]
        to_unit: String,
        #[arg(long, default_value = "MergeUnits")]
        update_type: String,
    },
    /// List links.
    List {
        #[arg(long)]
        space: Option<String>,
        #[command(flatten)]
        where_: WhereArg,
    },
    /// Delete a link.
    Delete {
        slug: String,
        #[arg(long)]
        space: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TagCmd {
    Create {
        slug: String,
        #[arg(long)]
        space: String,
    },
    List {
        #[arg(long)]
        space: Option<String>,
        #[command(flatten)]
        where_: WhereArg,
    },
    Delete {
        slug: String,
        #[arg(long)]
        space: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum FilterCmd {
    /// Save a where expression over an entity kind.
    Create {
        slug: String,
        #[arg(long)]
        space: String,
        /// Entity kind: Space, Unit, Revision, Link, …
        #[arg(long)]
        from: String,
        #[arg(long)]
        where_field: String,
    },
    List {
        #[arg(long)]
        space: Option<String>,
        #[command(flatten)]
        where_: WhereArg,
    },
    Delete {
        slug: String,
        #[arg(long)]
        space: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TargetCmd {
    /// Create a Target: --provider Directory --option path=DIR, or Webhook --option url=URL.
    Create {
        slug: String,
        #[arg(long)]
        space: String,
        #[arg(long)]
        provider: String,
        #[arg(long = "option", value_parser = key_value)]
        options: Vec<(String, String)>,
    },
    List {
        #[arg(long)]
        space: Option<String>,
        #[command(flatten)]
        where_: WhereArg,
    },
    Delete {
        slug: String,
        #[arg(long)]
        space: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum InvocationCmd {
    /// Create from YAML: Parameters [{Name, DataType, Required}], FunctionInvocations
    /// [{FunctionName, Arguments [{Value}]}]; an argument "{{ .image }}" takes a parameter.
    Create {
        slug: String,
        #[arg(long)]
        space: String,
        #[arg(long)]
        file: String,
    },
    List {
        #[arg(long)]
        space: Option<String>,
        #[command(flatten)]
        where_: WhereArg,
    },
    Get {
        slug: String,
        #[arg(long)]
        space: String,
    },
    Delete {
        slug: String,
        #[arg(long)]
        space: String,
    },
    /// Run an Invocation (space/slug) on Units of --space.
    Run {
        invocation: String,
        #[arg(long)]
        space: String,
        #[arg(long = "param", value_parser = key_value)]
        params: Vec<(String, String)>,
        #[arg(long, conflicts_with = "where_")]
        unit: Option<String>,
        #[command(flatten)]
        where_: WhereArg,
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum FunctionCmd {
    /// List the functions and what they do.
    List,
    /// Run one function on a Unit (--unit), the Units matching --where, or all Units of --space.
    Do {
        function: String,
        args: Vec<String>,
        #[arg(long)]
        space: String,
        #[arg(long, conflicts_with = "where_")]
        unit: Option<String>,
        #[command(flatten)]
        where_: WhereArg,
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        change_desc: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum UserCmd {
    /// Create a user; --grant SPACE=View|Edit|Approve|Manage ('*' for every Space).
    Create {
        name: String,
        #[arg(long = "grant")]
        grants: Vec<String>,
        #[arg(long)]
        admin: bool,
    },
    List,
    /// Who am I?
    Me,
}

#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// Mint a token; it is printed once and only its hash is kept.
    Create {
        #[arg(long)]
        user: String,
    },
}

fn sp(space: &str) -> String {
    format!("/v1/spaces/{}", enc(space))
}

fn list_path(kind: &str, space: &Option<String>, where_: &WhereArg) -> String {
    let mut q = vec![];
    if let Some(w) = &where_.where_ {
        q.push(format!("where={}", enc(w)));
    }
    match space.as_deref() {
        Some(s) if s != "*" => format!(
            "{}/{kind}{}",
            sp(s),
            if q.is_empty() { String::new() } else { format!("?{}", q.join("&")) }
        ),
        _ => format!("/v1/{kind}{}", if q.is_empty() { String::new() } else { format!("?{}", q.join("&")) }),
    }
}

/// Runs one entity command.
pub async fn run(c: &Client, out: Format, command: Command) -> Result<()> {
    let (v, cols): (Value, Columns) = match command {
        Command::Space(cmd) => match cmd {
            SpaceCmd::Create { slug, labels, annotations } => (
                c.post(
                    "/v1/spaces",
                    &json!({"Slug": slug, "Labels": map(&labels), "Annotations": map(&annotations)}),
                )
                .await?,
                output::SPACE,
            ),
            SpaceCmd::List(w) => (c.get(&format!("/v1/spaces{}", w.query())).await?, output::SPACE),
            SpaceCmd::Get { slug } => (c.get(&sp(&slug)).await?, output::SPACE),
            SpaceCmd::Update { slug, labels, annotations, release_target, version } => {
                let mut body = json!({"Labels": map(&labels), "Annotations": map(&annotations)});
                if let Some(t) = release_target {
                    body["ReleaseTarget"] = json!(t);
                }
                if let Some(v) = version {
                    body["Version"] = json!(v);
                }
                (c.patch(&sp(&slug), &body).await?, output::SPACE)
            }
            SpaceCmd::Delete { slug } => {
                c.delete(&sp(&slug)).await?;
                eprintln!("deleted space {slug}");
                return Ok(());
            }
        },
        Command::Unit(cmd) => return unit(c, out, cmd).await,
        Command::Revision(RevisionCmd::List { space, unit }) => {
            (c.get(&format!("{}/units/{}/revisions", sp(&space), enc(&unit))).await?, output::REVISION)
        }
        Command::Variant(cmd) => match cmd {
            VariantCmd::Create { new_space, from, labels, annotations } => {
                let body =
                    json!({"Slug": new_space, "Labels": map(&labels), "Annotations": map(&annotations)});
                let v = c.post(&format!("{}/variants", sp(&from)), &body).await?;
                if out == Format::Table {
                    let n = v["Units"].as_array().map_or(0, Vec::len);
                    eprintln!("created variant {new_space} of {from} with {n} unit(s)");
                    (v["Space"].clone(), output::SPACE)
                } else {
                    (v, output::SPACE)
                }
            }
            VariantCmd::Promote {
                space,
                squash,
                change_order,
                dry_run,
                expected_plan,
                target_stage,
                force,
                reason,
                wait,
                rollout,
            } => match (change_order, space) {
                (Some(change_order), space) if !dry_run && expected_plan.is_none() => {
                    let body = json!({"Space": space, "TargetStage": target_stage, "Force": force,
                                      "Reason": reason});
                    return super::promotions::request(c, out, &change_order, body, &rollout, wait).await;
                }
                (Some(change_order), space) => {
                    let args = super::changeorders::PromoteArgs {
                        space,
                        change_order,
                        dry_run,
                        expected_plan,
                        target_stage,
                        force,
                        reason,
                    };
                    return super::changeorders::promote(c, out, args).await;
                }
                (None, Some(space)) => (
                    c.post(&format!("{}/promote", sp(&space)), &json!({"Squash": squash})).await?,
                    output::PROMOTED,
                ),
                (None, None) => bail!("name the variant to promote, or pass --change-order SPACE/SLUG"),
            },
            VariantCmd::Demote { space, change_order } => {
                return super::changeorders::demote(c, out, &space, &change_order).await;
            }
        },
        Command::Link(cmd) => match cmd {
            LinkCmd::Create { slug, space, from_unit, to_unit, update_type } => {
                let body = json!({"Slug": slug, "FromUnit": from_unit, "ToUnit": to_unit, "UpdateType": update_type});
                (c.post(&format!("{}/links", sp(&space)), &body).await?, output::LINK)
            }
            LinkCmd::List { space, where_ } => {
                (c.get(&list_path("links", &space, &where_)).await?, output::LINK)
            }
            LinkCmd::Delete { slug, space } => {
                return delete(c, &format!("{}/links/{}", sp(&space), enc(&slug)), "link", &slug).await;
            }
        },
        Command::Tag(cmd) => match cmd {
            TagCmd::Create { slug, space } => {
                (c.post(&format!("{}/tags", sp(&space)), &json!({"Slug": slug})).await?, output::SIMPLE)
            }
            TagCmd::List { space, where_ } => {
                (c.get(&list_path("tags", &space, &where_)).await?, output::SIMPLE)
            }
            TagCmd::Delete { slug, space } => {
                return delete(c, &format!("{}/tags/{}", sp(&space), enc(&slug)), "tag", &slug).await;
            }
        },
        Command::Filter(cmd) => match cmd {
            FilterCmd::Create { slug, space, from, where_field } => (
                c.post(
                    &format!("{}/filters", sp(&space)),
                    &json!({"Slug": slug, "From": from, "Where": where_field}),
                )
                .await?,
                output::FILTER,
            ),
            FilterCmd::List { space, where_ } => {
                (c.get(&list_path("filters", &space, &where_)).await?, output::FILTER)
            }
            FilterCmd::Delete { slug, space } => {
                return delete(c, &format!("{}/filters/{}", sp(&space), enc(&slug)), "filter", &slug).await;
            }
        },
        Command::Target(cmd) => match cmd {
            TargetCmd::Create { slug, space, provider, options } => (
                c.post(
                    &format!("{}/targets", sp(&space)),
                    &json!({"Slug": slug, "ProviderType": provider, "Options": map(&options)}),
                )
                .await?,
                output::TARGET,
            ),
            TargetCmd::List { space, where_ } => {
                (c.get(&list_path("targets", &space, &where_)).await?, output::TARGET)
            }
            TargetCmd::Delete { slug, space } => {
                return delete(c, &format!("{}/targets/{}", sp(&space), enc(&slug)), "target", &slug).await;
            }
        },
        Command::Invocation(cmd) => match cmd {
            InvocationCmd::Create { slug, space, file } => {
                let text = read_input(&file)?;
                let mut body: Value =
                    serde_saphyr::from_str(&text).with_context(|| format!("{file} is not valid YAML"))?;
                if !body.is_object() {
                    bail!("{file}: expected a mapping with Parameters and FunctionInvocations");
                }
                body["Slug"] = json!(slug);
                (c.post(&format!("{}/invocations", sp(&space)), &body).await?, output::INVOCATION)
            }
            InvocationCmd::List { space, where_ } => {
                (c.get(&list_path("invocations", &space, &where_)).await?, output::INVOCATION)
            }
            InvocationCmd::Get { slug, space } => {
                (c.get(&format!("{}/invocations/{}", sp(&space), enc(&slug))).await?, output::INVOCATION)
            }
            InvocationCmd::Delete { slug, space } => {
                return delete(c, &format!("{}/invocations/{}", sp(&space), enc(&slug)), "invocation", &slug)
                    .await;
            }
            InvocationCmd::Run { invocation, space, params, unit, where_, dry_run } => {
                let body = json!({"Invocation": invocation, "Parameters": map(&params), "Unit": unit, "Where": where_.where_, "DryRun": dry_run});
                (c.post(&format!("{}/invoke", sp(&space)), &body).await?, output::FUNCTION_RESULT)
            }
        },
        Command::Function(cmd) => match cmd {
            FunctionCmd::List => (c.get("/v1/functions").await?, output::FUNCTION),
            FunctionCmd::Do { function, args, space, unit, where_, dry_run, change_desc } => {
                let arguments: Vec<Value> = args.iter().map(|a| json!({"Value": a})).collect();
                let body = json!({"FunctionName": function, "Arguments": arguments, "Unit": unit, "Where": where_.where_,
                                  "DryRun": dry_run, "ChangeDescription": change_desc});
                (c.post(&format!("{}/functions/do", sp(&space)), &body).await?, output::FUNCTION_RESULT)
            }
        },
        Command::User(cmd) => match cmd {
            UserCmd::Create { name, grants, admin } => (
                c.post("/v1/users", &json!({"Slug": name, "Grants": grants, "Admin": admin})).await?,
                output::USER,
            ),
            UserCmd::List => (c.get("/v1/users").await?, output::USER),
            UserCmd::Me => (c.get("/v1/me").await?, output::USER),
        },
        Command::Token(TokenCmd::Create { user }) => {
            let v = c.post(&format!("/v1/users/{}/tokens", enc(&user)), &json!({})).await?;
            match out {
                Format::Table => println!("{}", v["Token"].as_str().unwrap_or_default()),
                _ => output::print(&v, out, output::SIMPLE),
            }
            return Ok(());
        }
        Command::Serve(_)
        | Command::Worker(_)
        | Command::Promotion(_)
        | Command::Schedule(_)
        | Command::Backfill(_)
        | Command::Demo
        | Command::Render(_)
        | Command::Release(_)
        | Command::Livestatus(_)
        | Command::Changeorder(_)
        | Command::Attestation(_)
        | Command::Changeworkflow(_)
        | Command::Webhook(_) => {
            unreachable!("handled by the caller")
        }
    };
    output::print(&v, out, cols);
    Ok(())
}

async fn delete(c: &Client, path: &str, kind: &str, slug: &str) -> Result<()> {
    c.delete(path).await?;
    eprintln!("deleted {kind} {slug}");
    Ok(())
}

async fn unit(c: &Client, out: Format, cmd: UnitCmd) -> Result<()> {
    let unit_path = |space: &str, slug: &str| format!("{}/units/{}", sp(space), enc(slug));
    let (v, cols) = match cmd {
        UnitCmd::Create { slug, space, file, toolchain, labels, change_desc } => {
            let data = read_input(&file)?;
            let body = json!({"Slug": slug, "Data": data, "ToolchainType": toolchain, "Labels": map(&labels),
                              "ChangeDescription": change_desc});
            (c.post(&format!("{}/units", sp(&space)), &body).await?, output::UNIT)
        }
        UnitCmd::Update {
            slug,
            space,
            file,
            change_desc,
            protect,
            upgrade,
            squash,
            link,
            to_revision,
            labels,
            version,
        } => {
            if upgrade {
                let body = json!({"Squash": squash, "Link": link, "ToRevisionNum": to_revision});
                let v = c.post(&format!("{}/upgrade", unit_path(&space, &slug)), &body).await?;
                if out == Format::Table {
                    let n = v["Revisions"].as_array().map_or(0, Vec::len);
                    let k = v["Conflicts"].as_array().map_or(0, Vec::len);
                    eprintln!("upgraded {space}/{slug}: {n} new revision(s), {k} conflict(s)");
                }
                (v, output::UPGRADE)
            } else {
                let mut body =
                    json!({"Labels": map(&labels), "Protect": protect, "ChangeDescription": change_desc});
                if let Some(f) = file {
                    body["Data"] = json!(read_input(&f)?);
                }
                if let Some(v) = version {
                    body["Version"] = json!(v);
                }
                let v = c.patch(&unit_path(&space, &slug), &body).await?;
                if out == Format::Table {
                    match v["Revision"]["RevisionNum"].as_i64() {
                        Some(n) => eprintln!("{space}/{slug}: revision {n}"),
                        None => eprintln!("{space}/{slug}: data unchanged, no revision written"),
                    }
                    (v["Unit"].clone(), output::UNIT)
                } else {
                    (v, output::UNIT)
                }
            }
        }
        UnitCmd::Get { slug, space } => (c.get(&unit_path(&space, &slug)).await?, output::UNIT),
        UnitCmd::List { space, where_ } => {
            let path = match space.as_deref() {
                Some(s) if s != "*" => format!("{}/units{}", sp(s), where_.query()),
                _ => format!("/v1/units{}", where_.query()),
            };
            (c.get(&path).await?, output::UNIT)
        }
        UnitCmd::Data { slug, space, revision } => {
            let q = revision.map(|r| format!("?revision={r}")).unwrap_or_default();
            let data = c.text(&format!("{}/data{q}", unit_path(&space, &slug))).await?;
            match out {
                Format::Json => println!("{}", json!({"Data": data})),
                _ => print!("{data}"),
            }
            return Ok(());
        }
        UnitCmd::Conflicts { slug, space } => {
            (c.get(&format!("{}/conflicts", unit_path(&space, &slug))).await?, output::CONFLICT)
        }
        UnitCmd::Delete { slug, space } => {
            return delete(c, &unit_path(&space, &slug), "unit", &slug).await;
        }
    };
    output::print(&v, out, cols);
    Ok(())
}
