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
mod render;
mod webhooks;

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
    /// Start a throw-away server and walk a ChangeOrder dev → staging → prod behind its gates.
    Demo,
    /// Render Deckhand-style layered documents from a local file (no server needed).
    Render(render::RenderArgs),
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
    /// Webhooks: signed endpoints that promote or attest a ChangeOrder.
    #[command(subcommand)]
    Webhook(webhooks::WebhookCmd),
    /// Releases: numbered bundles of a Space's Units delivered to its release Target.
    #[command(subcommand)]
    Release(releases::ReleaseCmd),
    /// Live status: what the GitOps operator reports about a Space's latest Release.
    #[command(subcommand)]
    Livestatus(releases::LivestatusCmd),
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A site settings layer (YAML, e.g. config/sites/fleet.yaml) rendered over the built-in
    /// defaults (config/global.yaml); flags and their environment variables override both.
    #[arg(long, env = "CHANGEFLOW_SITE_CONFIG")]
    pub site_config: Option<PathBuf>,
    /// Directory for the embedded database and admin.token [default: changeflow-data].
    #[arg(long, env = "CHANGEFLOW_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:7070].
    #[arg(long, env = "CHANGEFLOW_LISTEN")]
    pub listen: Option<String>,
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
    // `serve` sets up logging once its settings (with their log level) are loaded.
    if !matches!(cli.command, Command::Serve(_)) {
        // The demo narrates on its own; the server's info logs would drown it.
        init_logging(if matches!(cli.command, Command::Demo) { "warn" } else { "info" });
    }
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime starts");
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr at `level` for changeflow (warnings from dependencies); `RUST_LOG` wins.
fn init_logging(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| format!("changeflow={level},warn").into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

fn default_token() -> Option<String> {
    let dir = std::env::var("CHANGEFLOW_DATA_DIR").unwrap_or_else(|_| "changeflow-data".into());
    std::fs::read_to_string(PathBuf::from(dir).join("admin.token")).ok().map(|t| t.trim().to_string())
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Demo => demo::run().await,
        Command::Render(args) => render::run(args, cli.output),
        command => {
            let token = cli.token.or_else(default_token);
            let client = Client::new(&cli.server, token).print_errors(cli.output != Format::Table);
            match command {
                Command::Changeworkflow(cmd) => changeorders::run_workflow(&client, cli.output, cmd).await,
                Command::Attestation(cmd) => attestations::run(&client, cli.output, cmd).await,
                Command::Changeorder(cmd) => changeorders::run(&client, cli.output, cmd).await,
                Command::Webhook(cmd) => webhooks::run(&client, cli.output, cmd).await,
                Command::Release(cmd) => releases::run_release(&client, cli.output, cmd).await,
                Command::Livestatus(cmd) => releases::run_livestatus(&client, cli.output, cmd).await,
                command => commands::run(&client, cli.output, command).await,
            }
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let overrides = crate::settings::Overrides {
        listen: args.listen,
        data_dir: args.data_dir,
        db: args.db,
        log_level: None,
    };
    let settings = crate::settings::load(args.site_config.as_deref(), overrides)?;
    init_logging(&settings.live.log_level);
    let data_dir = settings.restart.data_dir.clone();
    let server = crate::server::start(crate::server::ServeOptions {
        data_dir: data_dir.clone(),
        listen: settings.restart.listen.clone(),
        db: Some(settings.restart.db.clone()).filter(|d| !d.is_empty()),
        max_body_bytes: settings.live.max_body_bytes,
    })
    .await?;
    if let Some(t) = &server.new_admin_token {
        eprintln!("bootstrap admin token (also written to {}):", data_dir.join("admin.token").display());
        println!("{t}");
    }
    eprintln!("changeflow listening on {}", server.url());
    shutdown_signal().await?;
    eprintln!("shutting down: finishing in-flight requests");
    server.stop().await
}

/// Ctrl-C, or SIGTERM where there is one (what a process supervisor sends).
async fn shutdown_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await?;
    Ok(())
}
