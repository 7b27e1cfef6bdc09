//! `release publish|list|get` and `livestatus set`: publishing a Space's Units to its release
//! Target and recording what the GitOps operator reports back.

use super::client::{Client, enc};
use super::output::{self, Columns, Format};
use crate::model::{HealthStatus, OperationPhase, SyncStatus};
use anyhow::Result;
use clap::Subcommand;
use clap::builder::PossibleValuesParser;
use reqwest::Method;
use serde_json::{Value, json};

const RELEASE: Columns = &[
    ("NUM", "/ReleaseNum"),
    ("SLUG", "/Slug"),
    ("REVISION", "/RevisionSpec"),
    ("UNITS", "/Revisions"),
    ("SYNC", "/LiveStatus/Sync"),
    ("OPERATION", "/LiveStatus/Operation"),
    ("HEALTH", "/LiveStatus/Health"),
    ("CREATED", "/CreatedAt"),
];
const RELEASED_REVISION: Columns =
    &[("UNIT", "/UnitSlug"), ("REVISION", "/RevisionNum"), ("DATA-HASH", "/DataHash")];

#[derive(Debug, Subcommand)]
pub enum ReleaseCmd {
    /// Publish the Space's Units to its release Target as a new, numbered Release.
    ///
    /// The bundle is delivered first (a Directory target gets one <unit>.yaml per Unit plus
    /// release.json under <path>/<space>/; a Webhook target gets it POSTed as JSON) and the
    /// Release is recorded only if delivery succeeded. The Space needs a release Target:
    /// `changeflow space update <space> --release-target SPACE/TARGET`.
    Publish {
        /// The Space to publish.
        space: String,
        /// Which revision of each Unit to bundle: omit for every head; Tag:<tag> for the
        /// revisions a Tag marks; ChangeOrder:<changeorder> for where a change arrived in this
        /// Space; Before:ChangeOrder:<changeorder> for the state before it (a rollback). Name
        /// a Tag or ChangeOrder as space/slug, UUID, or slug (a ChangeOrder's slug is also
        /// looked up in the Space's upstreams). A Unit the Tag does not mark, or a revision
        /// with validation errors, refuses the publish.
        #[arg(long, value_name = "SPEC")]
        revision: Option<String>,
    },
    /// List a Space's Releases, newest first.
    List {
        /// The Space whose Releases to list.
        #[arg(long)]
        space: String,
        /// Where expression over Releases, e.g. "ReleaseNum > 3 AND LiveStatus.Health = 'Healthy'".
        #[arg(long = "where")]
        where_: Option<String>,
    },
    /// Show one Release: its bundled revisions, digest and live status.
    Get {
        /// ReleaseNum, Slug (release-<n>), UUID, or `latest`.
        release: String,
        /// The Space that published it.
        #[arg(long)]
        space: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum LivestatusCmd {
    /// Record what the GitOps operator reports about the Space's latest Release.
    ///
    /// The Healthy gate of a ChangeWorkflow holds when the latest report is Synced, Succeeded
    /// and Healthy.
    Set {
        /// The Space whose latest Release the report is about.
        space: String,
        /// Whether the live state matches the Release.
        #[arg(long, value_parser = PossibleValuesParser::new(SyncStatus::ALL.iter().copied()))]
        sync: String,
        /// The phase of the operator's last sync operation.
        #[arg(long, value_parser = PossibleValuesParser::new(OperationPhase::ALL.iter().copied()))]
        operation: String,
        /// The health of the deployed resources.
        #[arg(long, value_parser = PossibleValuesParser::new(HealthStatus::ALL.iter().copied()))]
        health: String,
        /// Free text from the operator (at most 1024 bytes).
        #[arg(long)]
        message: Option<String>,
        /// When the operator observed this (RFC 3339); default: now.
        #[arg(long)]
        observed_at: Option<String>,
    },
}

fn releases_path(space: &str) -> String {
    format!("/v1/spaces/{}/releases", enc(space))
}

/// Runs one `release` command.
pub async fn run_release(c: &Client, out: Format, cmd: ReleaseCmd) -> Result<()> {
    match cmd {
        ReleaseCmd::Publish { space, revision } => {
            let v = c.post(&releases_path(&space), &json!({"Revision": revision})).await?;
            if out == Format::Table {
                eprintln!(
                    "published {} of {space}: {} unit(s), digest {}",
                    v["Slug"].as_str().unwrap_or_default(),
                    v["Revisions"].as_array().map_or(0, Vec::len),
                    v["Digest"].as_str().unwrap_or_default()
                );
            }
            output::print(&v, out, RELEASE);
        }
        ReleaseCmd::List { space, where_ } => {
            let q = where_.map(|w| format!("?where={}", enc(&w))).unwrap_or_default();
            output::print(&c.get(&format!("{}{q}", releases_path(&space))).await?, out, RELEASE);
        }
        ReleaseCmd::Get { release, space } => {
            let v = c.get(&format!("{}/{}", releases_path(&space), enc(&release))).await?;
            output::print(&v, out, RELEASE);
            if out == Format::Table {
                println!("\nDigest: {}", v["Digest"].as_str().unwrap_or_default());
                if let Some(m) = v["LiveStatus"]["Message"].as_str().filter(|m| !m.is_empty()) {
                    println!(
                        "Live status: {m} (observed {})",
                        v["LiveStatus"]["ObservedAt"].as_str().unwrap_or("-")
                    );
                }
                println!();
                output::print(&v["Revisions"], out, RELEASED_REVISION);
            }
        }
    }
    Ok(())
}

/// Runs one `livestatus` command.
pub async fn run_livestatus(c: &Client, out: Format, cmd: LivestatusCmd) -> Result<()> {
    let LivestatusCmd::Set { space, sync, operation, health, message, observed_at } = cmd;
    let body = json!({"Sync": sync, "Operation": operation, "Health": health, "Message": message,
                      "ObservedAt": observed_at});
    let v: Value =
        c.json(Method::PUT, &format!("/v1/spaces/{}/livestatus", enc(&space)), Some(&body)).await?;
    output::print(&v, out, RELEASE);
    Ok(())
}
