//! The command line: `changeflow <entity> <verb>`, mirroring ConfigHub's `cub`. Every command
//! except `serve`, `demo` and `render` is a client of the HTTP API. Errors go to stderr with a
//! non-zero exit; `-o json|yaml` prints what the API returned.

mod attestations;
mod changeorders;
mod client;
mod commands;
mod demo;
mod output;
mod releases;

pub use client::Client;
pub use output::Format;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// changeflow: move named configuration changes safely through a fleet of Spaces.
///
/// Start a server with `changeflow serve`, then drive it with the entity commands. The CLI
/// finds the server with --server (CHANGEFLOW_SERVER) and authenticates with --token
/// (CHANGEFLOW_TOKEN); without a token it reads DATA_DIR/admin.token.
#[derive(Debug, Parser)]
#[command(name = "changeflow", version)]
pub struct Cli {
    /// Server URL.
    #[arg(long, global = true, env = "CHANGEFLOW_SERVER", default_value = "http://127.0.0.1:7070")]
    pub server: String,
    /// Bearer token; default: the contents of DATA_DIR/admin.token if it exists.
    #[arg(long, global = true, env = "CHANGEFLOW_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the API server (embedded SQLite store by default).
    Serve(ServeArgs),
    /// Start a throw-away server and walk a change from a base Space into three variants.
    Demo,
    /// Spaces: containers of Units.
    #[command(subcommand)]
    Space(commands::SpaceCmd),
    /// Units: YAML document streams with revision history.
    #[command(subcommand)]
    Unit(commands::UnitCmd),
    /// Revisions of a Unit.
    #[command(subcommand)]
    Revision(commands::RevisionCmd),
    /// ChangeWorkflows: the Stages (waves) a change moves through and their gates.
    #[command(subcommand)]
    Changeworkflow(changeorders::WorkflowCmd),
    /// Attestations: approvals (or rejections) of a change as it stands in a Space.
    #[command(subcommand)]
    Attestation(attestations::AttestationCmd),
    /// ChangeOrders: one change's identity as it crosses Space boundaries.
    #[command(subcommand)]
    Changeorder(changeorders::ChangeorderCmd),
    /// Variants: Spaces cloned from another, kept up to date by merges.
    #[command(subcommand)]
    Variant(commands::VariantCmd),
    /// Links between Units (merge cursors).
    #[command(subcommand)]
    Link(commands::LinkCmd),
    /// Tags: named sets of revisions.
    #[command(subcommand)]
    Tag(commands::TagCmd),
    /// Filters: saved where expressions.
    #[command(subcommand)]
    Filter(commands::FilterCmd),
    /// Targets: where a Space's Releases go.
    #[command(subcommand)]
    Target(commands::TargetCmd),
    /// Invocations: stored, parameterized lists of function calls.
    #[command(subcommand)]
    Invocation(commands::InvocationCmd),
    /// Functions that mutate or validate Unit data.
    #[command(subcommand)]
    Function(commands::FunctionCmd),
    /// Users and their permissions.
    #[command(subcommand)]
    User(commands::UserCmd),
    /// API tokens.
    #[command(subcommand)]
    Token(commands::TokenCmd),
    /// Releases: numbered bundles of a Space's Units delivered to its release Target.
    #[command(subcommand)]
    Release(releases::ReleaseCmd),
    /// Live status: what the GitOps operator reports about a Space's latest Release.
    #[command(subcommand)]
    Livestatus(releases::LivestatusCmd),
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Directory for the embedded database and admin.token.
    #[arg(long, env = "CHANGEFLOW_DATA_DIR", default_value = "changeflow-data")]
    pub data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: String,
    /// Store URL: sqlite://PATH or postgres://…[?schema=NAME]. Default: DATA_DIR/changeflow.db.
    #[arg(long, env = "CHANGEFLOW_DB")]
    pub db: Option<String>,
}

/// Parses `K=V`.
pub(crate) fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected KEY=VALUE, got '{s}'"))
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
            // The demo narrates on its own; the server's info logs would drown it.
            let quiet = matches!(cli.command, Command::Demo);
            (if quiet { "warn" } else { "changeflow=info,warn" }).into()
        }))
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime starts");
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn default_token() -> Option<String> {
    let dir = std::env::var("CHANGEFLOW_DATA_DIR").unwrap_or_else(|_| "changeflow-data".into());
    std::fs::read_to_string(PathBuf::from(dir).join("admin.token")).ok().map(|t| t.trim().to_string())
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Demo => demo::run().await,
        command => {
            let token = cli.token.or_else(default_token);
            let client = Client::new(&cli.server, token);
            match command {
                Command::Changeworkflow(cmd) => changeorders::run_workflow(&client, cli.output, cmd).await,
                Command::Attestation(cmd) => attestations::run(&client, cli.output, cmd).await,
                Command::Changeorder(cmd) => changeorders::run(&client, cli.output, cmd).await,
                Command::Release(cmd) => releases::run_release(&client, cli.output, cmd).await,
                Command::Livestatus(cmd) => releases::run_livestatus(&client, cli.output, cmd).await,
                command => commands::run(&client, cli.output, command).await,
            }
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let server = crate::server::start(crate::server::ServeOptions {
        data_dir: args.data_dir.clone(),
        listen: args.listen,
        db: args.db,
    })
    .await?;
    if let Some(t) = &server.new_admin_token {
        eprintln!("bootstrap admin token (also written to {}):", args.data_dir.join("admin.token").display());
        println!("{t}");
    }
    eprintln!("changeflow listening on {}", server.url());
    tokio::select! {
        r = tokio::signal::ctrl_c() => { r?; eprintln!("shutting down"); }
    }
    server.stop().await
}
