//! Telemetry: Prometheus metrics rendered by the server's `/metrics` route, and the names of
//! every metric in one place. Spans come from `tracing` (per HTTP request, job, gate
//! evaluation and Space merge, with IDs as fields).

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

pub const JOBS: &str = "changeflow_jobs_total";
pub const QUEUE_DEPTH: &str = "changeflow_queue_depth";
pub const GATE_VERDICTS: &str = "changeflow_gate_verdicts_total";
pub const RATE_LIMIT_WAIT: &str = "changeflow_rate_limit_wait_seconds";
pub const SPACE_SECONDS: &str = "changeflow_space_promotion_seconds";
pub const PROMOTION_SECONDS: &str = "changeflow_promotion_seconds";
pub const UNITS: &str = "changeflow_units_promoted_total";
pub const JOB_PHASE: &str = "changeflow_job_phase_seconds";

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder once (later calls reuse it). `None` if another recorder
/// was installed first by an embedding program.
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let handle = PrometheusBuilder::new().install_recorder().ok()?;
            metrics::describe_counter!(JOBS, "Jobs handled, by outcome");
            metrics::describe_gauge!(QUEUE_DEPTH, "Jobs waiting on the queue (due or scheduled)");
            metrics::describe_counter!(GATE_VERDICTS, "Entry gate evaluations by a worker, by result");
            metrics::describe_histogram!(RATE_LIMIT_WAIT, "Time a job waited for rate-limit permits");
            metrics::describe_histogram!(SPACE_SECONDS, "Time to plan and apply one Space");
            metrics::describe_histogram!(PROMOTION_SECONDS, "Time from a Promotion's request to its end");
            metrics::describe_counter!(UNITS, "Units that received a change");
            metrics::describe_histogram!(JOB_PHASE, "Time a job spent per phase: claim, gates, apply, drive");
            Some(handle)
        })
        .as_ref()
}

/// The text exposition of every metric.
pub fn render() -> String {
    match prometheus() {
        Some(h) => {
            h.run_upkeep();
            h.render()
        }
        None => String::new(),
    }
}
