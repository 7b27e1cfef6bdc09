//! The command line: `changeflow <entity> <verb>`, mirroring ConfigHub's `cub`. Every command
//! except `serve`, `demo` and `render` is a client of the HTTP API. Errors go to stderr with a
//! non-zero exit; `-o json|yaml` prints what the API returned.

mod attestations;
mod changeorders;
mod client;
mod commands;
mod demo;
mod output;
mod promotions;
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
    /// Run queue workers (and the reconciler and scheduler) against a shared store and queue.
    Worker(WorkerArgs),
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
    /// Promotions: queued rollouts of a ChangeOrder, a task per Space, wave by wave.
    #[command(subcommand)]
    Promotion(promotions::PromotionCmd),
    /// Schedules: promote a ChangeOrder on a cron expression in a time zone.
    #[command(subcommand)]
    Schedule(promotions::ScheduleCmd),
    /// Roll a ChangeOrder (or an Invocation over --where-space) out through the queue and follow
    /// it; re-running the same command resumes it.
    Backfill(promotions::BackfillArgs),
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
    /// Queue URL: sqlite://PATH or redis://HOST:PORT. Default: DATA_DIR/queue.db.
    #[arg(long, env = "CHANGEFLOW_QUEUE")]
    pub queue: Option<String>,
    /// Queue name (the Redis key prefix); installs sharing one Redis need different names.
    #[arg(long, env = "CHANGEFLOW_QUEUE_NAME", default_value = "changeflow")]
    pub queue_name: String,
    /// Serve the API only; run workers elsewhere with `changeflow worker`.
    #[arg(long)]
    pub no_worker: bool,
}

/// `changeflow worker --db postgres://… --queue redis://…`: takes promotion jobs from the queue,
/// re-checks gates on every attempt, and applies one Space per store transaction. Runs the
/// reconciler and scheduler too (both are safe to run in every process).
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// A site settings layer rendered over the built-in defaults (rates, leases, backoff).
    #[arg(long, env = "CHANGEFLOW_SITE_CONFIG")]
    pub site_config: Option<PathBuf>,
    /// Store URL: postgres://…[?schema=NAME] or sqlite://PATH.
    #[arg(long, env = "CHANGEFLOW_DB")]
    pub db: String,
    /// Queue URL: redis://HOST:PORT or sqlite://PATH.
    #[arg(long, env = "CHANGEFLOW_QUEUE")]
    pub queue: String,
    #[arg(long, env = "CHANGEFLOW_QUEUE_NAME", default_value = "changeflow")]
    pub queue_name: String,
    /// Jobs handled at once [default: from settings, 8].
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Seconds a task stays this worker's without a lease renewal [default: from settings].
    #[arg(long)]
    pub lease_seconds: Option<u64>,
    /// Seconds between reconciler passes [default: from settings].
    #[arg(long)]
    pub reconcile_seconds: Option<u64>,
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
    if !matches!(cli.command, Command::Serve(_) | Command::Worker(_)) {
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
        Command::Worker(args) => worker(args).await,
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
                Command::Promotion(cmd) => promotions::run_promotion(&client, cli.output, cmd).await,
                Command::Schedule(cmd) => promotions::run_schedule(&client, cli.output, cmd).await,
                Command::Backfill(args) => promotions::backfill(&client, cli.output, args).await,
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
        queue: args.queue,
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
        queue: Some(settings.restart.queue.clone()).filter(|d| !d.is_empty()),
        queue_name: args.queue_name,
        worker: !args.no_worker,
        jobs: settings.live.jobs.to_runtime(),
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

async fn worker(args: WorkerArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let settings = crate::settings::load(args.site_config.as_deref(), Default::default())?;
    init_logging(&settings.live.log_level);
    let mut jobs = settings.live.jobs.clone();
    jobs.concurrency = args.concurrency.unwrap_or(jobs.concurrency);
    jobs.lease_seconds = args.lease_seconds.unwrap_or(jobs.lease_seconds);
    jobs.reconcile_seconds = args.reconcile_seconds.unwrap_or(jobs.reconcile_seconds);
    let store =
        crate::store::Store::connect(&args.db).await.with_context(|| format!("opening store {}", args.db))?;
    let queue = crate::jobs::queue::open(&args.queue, &args.queue_name)
        .await
        .with_context(|| format!("opening queue {}", args.queue))?;
    let jobs = crate::jobs::Jobs::new(store.clone(), queue, jobs.to_runtime());
    let (trigger, stop) = crate::jobs::queue::shutdown_pair();
    let tasks =
        [jobs.spawn_workers(stop.clone()), jobs.spawn_reconciler(stop.clone()), jobs.spawn_scheduler(stop)];
    eprintln!("changeflow worker on {} (queue {} '{}')", args.db, args.queue, args.queue_name);
    shutdown_signal().await?;
    eprintln!("shutting down: finishing jobs in hand");
    trigger.trigger();
    for t in tasks {
        let _ = t.await;
    }
    store.close().await;
    Ok(())
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
