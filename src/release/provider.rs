//! Delivering a bundle to a Target: one capability, [`Provider::deliver`], and one adapter per
//! `ProviderType`.
//!
//! - `Directory` (option `path`, absolute): writes `<path>/<space-slug>/` with one
//!   `<unit-slug>.yaml` per bundled Unit and `release.json` (the manifest), as a GitOps checkout
//!   would receive them. The new directory is written beside the old one and renamed into
//!   place, so a reader sees the previous release or the new one, never a mixture; files of
//!   Units no longer bundled disappear with the old directory.
//! - `Webhook` (option `url`): POSTs the bundle as JSON. `timeout-seconds` (default 10) bounds
//!   each attempt; 5xx answers and connection failures are retried with capped exponential
//!   backoff up to `attempts` (default 3) in all; a 4xx answer is final.

use super::Bundle;
use crate::model::{InvalidField, Target};
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;
use uuid::Uuid;

/// Why a delivery failed, in words a user can act on (the caller adds which Target).
#[derive(Debug, Clone, Error, PartialEq)]
#[error("{0}")]
pub struct DeliveryError(pub String);

/// Something that can receive a release bundle.
pub trait Provider {
    /// Delivers `bundle` completely, or fails leaving the receiver's previous release in place.
    fn deliver(&self, bundle: &Bundle) -> impl Future<Output = Result<(), DeliveryError>> + Send;
}

/// The provider a Target's `ProviderType` and `Options` describe.
#[derive(Debug, Clone)]
pub enum TargetProvider {
    Directory(DirectoryProvider),
    Webhook(WebhookProvider),
}

impl TargetProvider {
    /// Builds the provider for `target`; a missing or malformed option is named with its value.
    pub fn for_target(target: &Target) -> Result<TargetProvider, InvalidField> {
        let opt = |k: &str| target.Options.get(k).map(String::as_str).filter(|v| !v.is_empty());
        match target.ProviderType.as_str() {
            "Directory" => {
                let path = opt("path").ok_or_else(|| {
                    InvalidField::new("Options.path", "", "a Directory target needs option 'path'")
                })?;
                if !Path::new(path).is_absolute() {
                    return Err(InvalidField::new("Options.path", path, "must be an absolute path"));
                }
                Ok(TargetProvider::Directory(DirectoryProvider { root: PathBuf::from(path) }))
            }
            "Webhook" => {
                let url = opt("url").ok_or_else(|| {
                    InvalidField::new("Options.url", "", "a Webhook target needs option 'url'")
                })?;
                let timeout = match opt("timeout-seconds") {
                    None => 10,
                    Some(v) => v.parse::<u64>().ok().filter(|n| (1..=300).contains(n)).ok_or_else(|| {
                        InvalidField::new(
                            "Options.timeout-seconds",
                            v,
                            "expected whole seconds from 1 to 300",
                        )
                    })?,
                };
                let attempts = match opt("attempts") {
                    None => 3,
                    Some(v) => v.parse::<u32>().ok().filter(|n| (1..=10).contains(n)).ok_or_else(|| {
                        InvalidField::new("Options.attempts", v, "expected a whole number from 1 to 10")
                    })?,
                };
                Ok(TargetProvider::Webhook(WebhookProvider::new(url, Duration::from_secs(timeout), attempts)))
            }
            other => Err(InvalidField::new("ProviderType", other, "expected Directory or Webhook")),
        }
    }
}

impl Provider for TargetProvider {
    async fn deliver(&self, bundle: &Bundle) -> Result<(), DeliveryError> {
        match self {
            TargetProvider::Directory(d) => d.deliver(bundle).await,
            TargetProvider::Webhook(w) => w.deliver(bundle).await,
        }
    }
}

/// Writes releases into a folder, one subfolder per Space.
#[derive(Debug, Clone)]
pub struct DirectoryProvider {
    pub root: PathBuf,
}

impl Provider for DirectoryProvider {
    async fn deliver(&self, bundle: &Bundle) -> Result<(), DeliveryError> {
        let mut files: Vec<(String, Vec<u8>)> = bundle
            .Units
            .iter()
            .map(|u| (format!("{}.yaml", u.UnitSlug), u.Data.clone().into_bytes()))
            .collect();
        let mut manifest = serde_json::to_vec_pretty(&bundle.manifest()).expect("manifests serialize");
        manifest.push(b'\n');
        files.push(("release.json".into(), manifest));
        let (root, name) = (self.root.clone(), bundle.SpaceSlug.clone());
        let shown = root.join(&name);
        // Two deliveries renaming around one folder at once could fail each other; take turns.
        static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _turn = TURN.lock().await;
        tokio::task::spawn_blocking(move || replace_dir(&root, &name, &files))
            .await
            .map_err(|e| DeliveryError(format!("writing {} was interrupted: {e}", shown.display())))?
            .map_err(|e| DeliveryError(format!("cannot write {}: {e}", shown.display())))
    }
}

/// Makes `root/name` hold exactly `files`, switching from the old contents by renames.
fn replace_dir(root: &Path, name: &str, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(root)?;
    let id = Uuid::new_v4().simple();
    let target = root.join(name);
    let fresh = root.join(format!(".{name}.new-{id}"));
    let write = || -> std::io::Result<()> {
        std::fs::create_dir(&fresh)?;
        for (file, bytes) in files {
            let mut f = std::fs::File::create(fresh.join(file))?;
            f.write_all(bytes)?;
            f.sync_all()?;
        }
        Ok(())
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_dir_all(&fresh);
        return Err(e);
    }
    // A directory cannot be renamed over a non-empty one: move the old one aside first.
    let old = root.join(format!(".{name}.old-{id}"));
    let had_old = match std::fs::rename(&target, &old) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&fresh);
            return Err(e);
        }
    };
    if let Err(e) = std::fs::rename(&fresh, &target) {
        // Put the old release back; if a concurrent writer already put its own there, drop ours.
        if had_old && std::fs::rename(&old, &target).is_err() {
            let _ = std::fs::remove_dir_all(&old);
        }
        let _ = std::fs::remove_dir_all(&fresh);
        return Err(e);
    }
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
}

/// POSTs releases to a URL.
#[derive(Debug, Clone)]
pub struct WebhookProvider {
    pub url: String,
    pub timeout: Duration,
    pub attempts: u32,
    client: reqwest::Client,
}

/// First retry waits this long; each further one twice as long, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(4);

/// The wait before attempt `n + 1` after attempt `n` (1-based) failed.
fn backoff(n: u32) -> Duration {
    FIRST_BACKOFF.saturating_mul(1 << (n - 1).min(16)).min(MAX_BACKOFF)
}

/// An error with its causes, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(&format!(": {c}"));
        cur = c.source();
    }
    s
}

impl WebhookProvider {
    pub fn new(url: &str, timeout: Duration, attempts: u32) -> WebhookProvider {
        let client = reqwest::Client::builder().timeout(timeout).build().expect("HTTP client builds");
        WebhookProvider { url: url.to_string(), timeout, attempts: attempts.max(1), client }
    }
}

impl Provider for WebhookProvider {
    async fn deliver(&self, bundle: &Bundle) -> Result<(), DeliveryError> {
        let mut last = String::new();
        for n in 1..=self.attempts {
            if n > 1 {
                tokio::time::sleep(backoff(n - 1)).await;
            }
            match self.client.post(&self.url).json(bundle).send().await {
                Ok(resp) if resp.status().is_success() => return Ok(()),
                Ok(resp) if resp.status().is_server_error() => last = format!("HTTP {}", resp.status()),
                Ok(resp) => {
                    let status = resp.status();
                    let text = resp.text().await.unwrap_or_default();
                    let excerpt: String = text.chars().take(200).collect();
                    let sep = if excerpt.is_empty() { "" } else { ": " };
                    return Err(DeliveryError(format!(
                        "POST {} answered HTTP {status}{sep}{excerpt} (a 4xx answer is not retried)",
                        self.url
                    )));
                }
                Err(e) if e.is_connect() => last = format!("cannot connect: {}", chain(&e)),
                Err(e) if e.is_timeout() => {
                    return Err(DeliveryError(format!(
                        "POST {} got no answer within {}s (option timeout-seconds)",
                        self.url,
                        self.timeout.as_secs()
                    )));
                }
                Err(e) => return Err(DeliveryError(format!("POST {} failed: {}", self.url, chain(&e)))),
            }
        }
        Err(DeliveryError(format!(
            "POST {} failed after {} attempt(s); last: {last}",
            self.url, self.attempts
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Labels, Slug};
    use crate::release::BundleHeader;

    fn target(provider: &str, opts: &[(&str, &str)]) -> Target {
        let now = chrono::Utc::now();
        Target {
            TargetID: Uuid::new_v4(),
            SpaceID: Uuid::new_v4(),
            Slug: Slug::parse("out").unwrap(),
            DisplayName: "out".into(),
            Labels: Labels::new(),
            Annotations: Labels::new(),
            ProviderType: provider.into(),
            Options: opts.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            LastReleaseNum: 0,
            Version: 1,
            CreatedAt: now,
            UpdatedAt: now,
        }
    }

    fn bundle(units: &[(&str, &str)]) -> Bundle {
        let header = BundleHeader {
            space_id: Uuid::nil(),
            space_slug: "dev".into(),
            target_id: Uuid::nil(),
            target_slug: "out".into(),
            release_num: 1,
            revision_spec: String::new(),
            change_order_id: None,
        };
        Bundle::build(
            header,
            units.iter().map(|(s, d)| (Uuid::new_v4(), s.to_string(), 1, d.to_string())).collect(),
        )
    }

    #[test]
    fn options_are_checked_and_named() {
        let e = TargetProvider::for_target(&target("Directory", &[("path", "rel/dir")])).unwrap_err();
        assert_eq!((e.field.as_str(), e.value.as_str()), ("Options.path", "rel/dir"));
        let e =
            TargetProvider::for_target(&target("Webhook", &[("url", "http://x"), ("timeout-seconds", "0")]))
                .unwrap_err();
        assert_eq!((e.field.as_str(), e.value.as_str()), ("Options.timeout-seconds", "0"));
        let e = TargetProvider::for_target(&target("Webhook", &[("url", "http://x"), ("attempts", "many")]))
            .unwrap_err();
        assert_eq!(e.field, "Options.attempts");
        let Ok(TargetProvider::Webhook(w)) =
            TargetProvider::for_target(&target("Webhook", &[("url", "http://x")]))
        else {
            panic!("a webhook")
        };
        assert_eq!((w.timeout, w.attempts), (Duration::from_secs(10), 3));
        assert_eq!(TargetProvider::for_target(&target("Kubernetes", &[])).unwrap_err().field, "ProviderType");
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(500));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }

    #[tokio::test]
    async fn directory_replaces_the_whole_release() {
        let dir = tempfile::tempdir().unwrap();
        let p = DirectoryProvider { root: dir.path().join("out") };
        p.deliver(&bundle(&[("web", "a: 1\n"), ("db", "b: 1\n")])).await.unwrap();
        let space = dir.path().join("out/dev");
        assert_eq!(std::fs::read_to_string(space.join("web.yaml")).unwrap(), "a: 1\n");
        assert!(space.join("db.yaml").exists());
        p.deliver(&bundle(&[("web", "a: 2\n")])).await.unwrap();
        assert_eq!(std::fs::read_to_string(space.join("web.yaml")).unwrap(), "a: 2\n");
        assert!(!space.join("db.yaml").exists(), "a Unit no longer bundled disappears");
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(space.join("release.json")).unwrap()).unwrap();
        assert_eq!(manifest["Units"][0]["UnitSlug"], "web");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("out")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary directories are left behind");
    }

    #[tokio::test]
    async fn directory_failure_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, "x").unwrap();
        let p = DirectoryProvider { root: file.clone() };
        let e = p.deliver(&bundle(&[("web", "a: 1\n")])).await.unwrap_err();
        assert!(e.0.contains("plain-file/dev"), "{e}");
    }

    #[tokio::test]
    async fn webhook_connection_failures_are_retried_then_reported() {
        // A port nothing listens on: bind, read the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let w = WebhookProvider::new(&format!("http://127.0.0.1:{port}/hook"), Duration::from_secs(2), 2);
        let e = w.deliver(&bundle(&[("web", "a: 1\n")])).await.unwrap_err();
        assert!(e.0.contains("after 2 attempt(s)") && e.0.contains("cannot connect"), "{e}");
    }
}
