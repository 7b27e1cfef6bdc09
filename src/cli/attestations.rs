//! `changeflow attestation …`: approve (or reject) a change as it stands in a Space.

use super::client::{Client, enc};
use super::output::{self, Columns, Format};
use anyhow::Result;
use clap::Subcommand;
use serde_json::json;

const ATTESTATION: Columns = &[
    ("SLUG", "/Slug"),
    ("TYPE", "/Type"),
    ("RESULT", "/Result"),
    ("USER", "/UserID"),
    ("REVISIONS", "/Revisions"),
    ("EXPIRES", "/ExpiresAt"),
    ("REVOKES", "/RevokedAttestationID"),
];

#[derive(Debug, Subcommand)]
pub enum AttestationCmd {
    /// Approve the change as it stands in --space (the revisions its end Tag marks there).
    /// Needs the Approve permission on the Space.
    Create {
        #[arg(long)]
        space: String,
        /// SPACE/SLUG of the ChangeOrder.
        #[arg(long)]
        change_order: String,
        /// Attestation type; Approval by default.
        #[arg(long = "type")]
        kind: Option<String>,
        /// Record a Fail instead of a Pass.
        #[arg(long)]
        reject: bool,
        /// How long it counts, e.g. 72h, 30m, 7d.
        #[arg(long)]
        expires_in: Option<String>,
        #[arg(long, default_value = "")]
        note: String,
    },
    /// Revoke an attestation (a new record; yours, or any with Manage on the Space).
    Revoke {
        attestation: String,
        #[arg(long)]
        space: String,
    },
    /// List a Space's attestations, optionally of one ChangeOrder.
    List {
        #[arg(long)]
        space: String,
        #[arg(long)]
        change_order: Option<String>,
    },
}

pub async fn run(c: &Client, out: Format, cmd: AttestationCmd) -> Result<()> {
    let v = match cmd {
        AttestationCmd::Create { space, change_order, kind, reject, expires_in, note } => {
            let body = json!({"ChangeOrder": change_order, "Type": kind, "Reject": reject, "ExpiresIn": expires_in, "Note": note});
            c.post(&format!("/v1/spaces/{}/attestations", enc(&space)), &body).await?
        }
        AttestationCmd::Revoke { attestation, space } => {
            c.post(
                &format!("/v1/spaces/{}/attestations/{}/revoke", enc(&space), enc(&attestation)),
                &json!({}),
            )
            .await?
        }
        AttestationCmd::List { space, change_order } => {
            let q = change_order.map(|co| format!("?change_order={}", enc(&co))).unwrap_or_default();
            c.get(&format!("/v1/spaces/{}/attestations{q}", enc(&space))).await?
        }
    };
    output::print(&v, out, ATTESTATION);
    Ok(())
}
