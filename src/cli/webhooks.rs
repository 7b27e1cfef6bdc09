//! `changeflow webhook …`: endpoints a CI system or a GitOps operator calls to act on a
//! ChangeOrder.

use super::client::{Client, enc};
use super::output::{self, Columns, Format};
use anyhow::Result;
use clap::Subcommand;
use serde_json::json;

const WEBHOOK: Columns = &[("SLUG", "/Slug"), ("ACTION", "/Action/Kind"), ("ID", "/WebhookID")];
const CREATED: Columns = &[("SLUG", "/Slug"), ("URL", "/URL"), ("SECRET", "/Secret")];

#[allow(clippy::large_enum_variant)] // parsed once from the command line
#[derive(Debug, Subcommand)]
pub enum WebhookCmd {
    /// Create a webhook; prints its URL and secret (shown once). Deliveries must carry
    /// X-Changeflow-Timestamp (unix seconds, within 5 minutes), X-Changeflow-Delivery (accepted
    /// once) and X-Changeflow-Signature: sha256=HMAC-SHA256(secret, "<timestamp>.<body>");
    /// GitHub's X-Hub-Signature-256 with X-GitHub-Delivery is accepted too.
    Create {
        slug: String,
        #[arg(long)]
        space: String,
        /// promote (queue a Promotion of --change-order to its next Stage, or --target-stage),
        /// attest (record an Attestation of --type in --attest-space), invoke (create an Invoke
        /// ChangeOrder of --invocation with --param values taken from the payload, over
        /// --where-space, and roll it out) or livestatus (an Argo CD notification sets the live
        /// status of --livestatus-space, or of the Space named like the Application).
        #[arg(long)]
        action: String,
        /// SPACE/SLUG of the ChangeOrder (promote, attest).
        #[arg(long)]
        change_order: Option<String>,
        /// SPACE/SLUG of the Invocation (invoke).
        #[arg(long)]
        invocation: Option<String>,
        /// NAME=/json/pointer: a parameter's value from the delivery's body, e.g. image=/build/image.
        #[arg(long = "param", value_parser = super::key_value)]
        params: Vec<(String, String)>,
        #[arg(long)]
        where_space: Option<String>,
        #[arg(long)]
        where_unit: Option<String>,
        #[arg(long)]
        livestatus_space: Option<String>,
        #[arg(long)]
        target_stage: Option<String>,
        #[arg(long = "type")]
        kind: Option<String>,
        #[arg(long)]
        attest_space: Option<String>,
    },
    /// List a Space's webhooks.
    List {
        #[arg(long)]
        space: String,
    },
    /// Delete a webhook.
    Delete {
        slug: String,
        #[arg(long)]
        space: String,
    },
}

pub async fn run(c: &Client, out: Format, cmd: WebhookCmd) -> Result<()> {
    let base = |space: &str| format!("/v1/spaces/{}/webhooks", enc(space));
    match cmd {
        WebhookCmd::Create {
            slug,
            space,
            action,
            change_order,
            invocation,
            params,
            where_space,
            where_unit,
            livestatus_space,
            target_stage,
            kind,
            attest_space,
        } => {
            let params: std::collections::BTreeMap<String, String> = params.into_iter().collect();
            let body = json!({"Slug": slug, "Action": action, "ChangeOrder": change_order,
                              "TargetStage": target_stage, "Type": kind, "AttestSpace": attest_space,
                              "Invocation": invocation, "Parameters": params, "WhereSpace": where_space,
                              "WhereUnit": where_unit, "LiveStatusSpace": livestatus_space});
            let v = c.post(&base(&space), &body).await?;
            output::print(&v, out, CREATED);
            eprintln!("keep the secret: it is not shown again");
        }
        WebhookCmd::List { space } => output::print(&c.get(&base(&space)).await?, out, WEBHOOK),
        WebhookCmd::Delete { slug, space } => {
            c.delete(&format!("{}/{}", base(&space), enc(&slug))).await?;
            eprintln!("deleted webhook {space}/{slug}");
        }
    }
    Ok(())
}
