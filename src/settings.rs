//! Settings: layered documents rendered by the same engine as Deckhand Units. The defaults are
//! `config/layering-policy.yaml` and `config/global.yaml` (compiled in, so the binary needs no
//! files); a site layer (`config/sites/<site>.yaml`, or any file) changes what a deployment
//! needs. Loading renders the layers, then deserializes the settings document with unknown keys
//! refused; command-line flags (and their environment variables) override on top.
//!
//! `restart` settings are read when a process starts (where it listens, where the store is);
//! `live` settings are safe to change on a running fleet, so a running process keeps them as
//! one immutable snapshot it can swap whole (ADR 0013).

use crate::layering::{self, RenderOptions};
use crate::model::parse_stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use thiserror::Error;

const POLICY: &str = include_str!("../config/layering-policy.yaml");
const GLOBAL: &str = include_str!("../config/global.yaml");
const SCHEMA: &str = "changeflow/Settings/v1";

/// Settings read once at start; changing them needs a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartSettings {
    pub listen: String,
    pub data_dir: PathBuf,
    /// Store URL; empty: `sqlite://<data_dir>/changeflow.db`.
    #[serde(default)]
    pub db: String,
    /// Queue URL; empty: `sqlite://<data_dir>/queue.db`.
    #[serde(default)]
    pub queue: String,
}

/// How workers run promotion jobs (live-safe).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobsSettings {
    /// Jobs handled at once by one process.
    pub concurrency: usize,
    /// Spaces started per second by one process (0: no cap), and per release Target.
    pub global_rate: f64,
    pub per_target_rate: f64,
    /// Seconds a worker holds a task without renewing its lease.
    pub lease_seconds: u64,
    /// Seconds between reconciler passes.
    pub reconcile_seconds: u64,
    /// Seconds past due before a queued task is considered lost by the queue.
    pub requeue_grace_seconds: u64,
    /// Retry backoff for blocked and transiently failing tasks.
    pub backoff_base_seconds: u64,
    pub backoff_cap_seconds: u64,
    /// Transient failures of one task before it is Failed.
    pub max_attempts: u32,
}

impl Default for JobsSettings {
    fn default() -> Self {
        let d = crate::jobs::JobSettings::default();
        JobsSettings {
            concurrency: d.concurrency,
            global_rate: d.global_rate,
            per_target_rate: d.per_target_rate,
            lease_seconds: d.lease.as_secs(),
            reconcile_seconds: d.reconcile_every.as_secs(),
            requeue_grace_seconds: d.requeue_grace.as_secs(),
            backoff_base_seconds: d.backoff_base.as_secs(),
            backoff_cap_seconds: d.backoff_cap.as_secs(),
            max_attempts: d.max_attempts,
        }
    }
}

impl JobsSettings {
    /// The runtime's settings.
    pub fn to_runtime(&self) -> crate::jobs::JobSettings {
        use std::time::Duration;
        crate::jobs::JobSettings {
            concurrency: self.concurrency.max(1),
            global_rate: self.global_rate,
            per_target_rate: self.per_target_rate,
            lease: Duration::from_secs(self.lease_seconds.max(1)),
            reconcile_every: Duration::from_secs(self.reconcile_seconds.max(1)),
            requeue_grace: Duration::from_secs(self.requeue_grace_seconds),
            backoff_base: Duration::from_secs(self.backoff_base_seconds.max(1)),
            backoff_cap: Duration::from_secs(self.backoff_cap_seconds.max(1)),
            max_attempts: self.max_attempts.max(1),
            ..crate::jobs::JobSettings::default()
        }
    }
}

/// Settings safe to change while running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveSettings {
    pub log_level: String,
    pub max_body_bytes: usize,
    #[serde(default)]
    pub jobs: JobsSettings,
}

/// All settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub restart: RestartSettings,
    pub live: LiveSettings,
}

#[derive(Debug, Error)]
pub enum SettingsError {
    #[error("reading settings layer {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("rendering settings: {0}")]
    Render(#[from] layering::LayeringError),
    #[error("settings: no {SCHEMA} document after rendering")]
    Missing,
    #[error("settings: {0}")]
    Invalid(String),
}

/// Overrides from the command line (clap reads each flag's environment variable too).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub db: Option<String>,
    pub queue: Option<String>,
    pub log_level: Option<String>,
}

fn layer_of(doc: &Value) -> &str {
    doc.pointer("/metadata/layeringDefinition/layer").and_then(Value::as_str).unwrap_or("")
}

/// Renders the built-in defaults with `site_layers` (YAML texts) on top and returns the
/// settings document of the most specific layer.
pub fn render(site_layers: &[&str]) -> Result<Settings, SettingsError> {
    let mut docs = vec![];
    for text in [POLICY, GLOBAL].iter().chain(site_layers) {
        docs.extend(parse_stream(text).map_err(|e| SettingsError::Invalid(e.to_string()))?);
    }
    let order: Vec<String> = docs
        .iter()
        .find(|d| d["schema"].as_str().is_some_and(|s| s.starts_with("deckhand/LayeringPolicy")))
        .and_then(|p| p.pointer("/data/layerOrder"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let rendered = layering::render(&docs, &RenderOptions::default())?;
    let settings = rendered
        .iter()
        .filter(|d| d["schema"] == SCHEMA)
        .max_by_key(|d| order.iter().position(|l| l == layer_of(d)))
        .ok_or(SettingsError::Missing)?;
    serde_json::from_value(settings["data"].clone()).map_err(|e| SettingsError::Invalid(e.to_string()))
}

/// Loads settings: defaults, then the site layer file (if any), then `overrides`.
pub fn load(site_file: Option<&Path>, overrides: Overrides) -> Result<Settings, SettingsError> {
    let site = match site_file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .map_err(|e| SettingsError::Read { path: p.to_path_buf(), reason: e.to_string() })?,
        ),
        None => None,
    };
    let layers: Vec<&str> = site.as_deref().into_iter().collect();
    let mut s = render(&layers)?;
    if let Some(v) = overrides.listen {
        s.restart.listen = v;
    }
    if let Some(v) = overrides.data_dir {
        s.restart.data_dir = v;
    }
    if let Some(v) = overrides.db {
        s.restart.db = v;
    }
    if let Some(v) = overrides.queue {
        s.restart.queue = v;
    }
    if let Some(v) = overrides.log_level {
        s.live.log_level = v;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/sites");

    #[test]
    fn defaults_render_from_the_global_layer() {
        let s = render(&[]).unwrap();
        assert_eq!(s.restart.listen, "127.0.0.1:7070");
        assert_eq!(s.live.max_body_bytes, 4 * 1024 * 1024);
    }

    #[test]
    fn a_site_layer_merges_and_a_replacement_replaces() {
        let laptop = std::fs::read_to_string(format!("{SITES}/laptop.yaml")).unwrap();
        let s = render(&[&laptop]).unwrap();
        assert_eq!(s.live.log_level, "debug");
        assert_eq!(s.restart.listen, "127.0.0.1:7070", "the rest comes from the global layer");
        let fleet = std::fs::read_to_string(format!("{SITES}/fleet.yaml")).unwrap();
        let s = render(&[&fleet]).unwrap();
        assert!(s.restart.db.starts_with("postgres://"));
        assert_eq!(s.live.log_level, "info", "kept from the global layer");
        assert_eq!(s.live.max_body_bytes, 8 * 1024 * 1024);
    }

    #[test]
    fn unknown_keys_are_refused_and_overrides_win() {
        let typo = "schema: changeflow/Settings/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: x\n  layeringDefinition:\n    abstract: false\n    layer: site\n    parentSelector:\n      component: changeflow-settings\n    actions:\n      - method: merge\n        path: .\ndata:\n  live:\n    log_levle: debug\n";
        let e = render(&[typo]).unwrap_err();
        assert!(e.to_string().contains("log_levle"), "{e}");
        let o = Overrides {
            listen: Some("0.0.0.0:1".into()),
            db: Some("sqlite://x".into()),
            ..Default::default()
        };
        let s = load(None, o).unwrap();
        assert_eq!((s.restart.listen.as_str(), s.restart.db.as_str()), ("0.0.0.0:1", "sqlite://x"));
    }
}
