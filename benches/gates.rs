//! Evaluating a Stage's entry gates over a large Stage, the pure part only.
//!
//! `cargo bench --bench gates` builds 1,000 staging Spaces (two end-Tag revisions each, with
//! approvals, live status and an annotated Space) and the documentation's example workflow, then
//! times `evaluate_entry` for prod (Promoted, Released, Healthy, not-frozen, approved) against a
//! 100-Space baseline measured in the same run. The CEL expression is compiled once, before
//! timing. Under `cargo test` it runs a small Stage once, so the bench cannot rot.

use changeflow::gates::{
    AttestationFact, AttestationResult, EXAMPLE_WORKFLOW, LiveFacts, RevisionFacts, SpaceFacts, compile,
    evaluate_entry, failing, parse_yaml,
};
use chrono::{TimeDelta, TimeZone, Utc};
use serde_json::json;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Gates per Space for prod: Promoted plus the four listed.
const GATES: usize = 5;

fn approval(user: u128, at: chrono::DateTime<Utc>) -> AttestationFact {
    AttestationFact {
        AttestationID: Uuid::from_u128(0xa000_0000 + user),
        UserID: Uuid::from_u128(user),
        UserName: format!("user-{user}"),
        Type: "Approval".into(),
        Result: AttestationResult::Pass,
        CreatedAt: at - TimeDelta::hours(3),
        ExpiresAt: Some(at + TimeDelta::days(7)),
        Revoked: false,
        AttesterCanApprove: true,
    }
}

/// A staging Space; every 10th is under a code freeze, so some verdicts fail as in real life.
fn space(i: usize, now: chrono::DateTime<Utc>) -> SpaceFacts {
    let slug = format!("staging-{i:04}");
    let frozen = if i.is_multiple_of(10) { "true" } else { "false" };
    let revisions = ["web", "db"]
        .iter()
        .enumerate()
        .map(|(n, unit)| RevisionFacts {
            UnitSlug: unit.to_string(),
            RevisionNum: 3 + n as i64,
            Authors: [Uuid::from_u128(1)].into(),
            Attestations: vec![approval(1, now), approval(2, now), approval(3, now)],
        })
        .collect();
    SpaceFacts {
        SpaceID: Uuid::from_u128(0x5000_0000 + i as u128),
        Slug: slug.clone(),
        Space: json!({
            "SpaceID": Uuid::from_u128(0x5000_0000 + i as u128), "Slug": slug, "DisplayName": "",
            "Labels": {"Component": "shop", "Stage": "staging", "Region": format!("r{}", i % 7)},
            "Annotations": {"code-freeze": frozen, "owner": "team-shop", "confighub.com/note": "x".repeat(64)},
            "ReleaseTargetID": Uuid::from_u128(0x7000_0000 + i as u128), "Version": 12,
        }),
        Promoted: true,
        ValidationErrors: vec![],
        HasReleaseTarget: true,
        Released: true,
        Release: Some(json!({"ReleaseNum": 4, "Annotations": {"loadtest": "passed"}, "Revisions": []})),
        LiveStatus: Some(LiveFacts {
            Sync: "Synced".into(),
            Operation: "Succeeded".into(),
            Health: "Healthy".into(),
        }),
        Revisions: revisions,
    }
}

fn time_entry(n: usize, runs: usize) -> Duration {
    let now = Utc.with_ymd_and_hms(2025, 3, 10, 12, 0, 0).unwrap();
    let wf = compile(parse_yaml(EXAMPLE_WORKFLOW).unwrap()).unwrap();
    let prod = wf.stage_index("prod").unwrap();
    let spaces: Vec<SpaceFacts> = (0..n).map(|i| space(i, now)).collect();
    let change_order =
        json!({"Slug": "bump", "Labels": {"Risk": "low"}, "ResolvedSpaceIDs": [], "Version": 3});
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let verdicts = evaluate_entry(&wf, prod, &spaces, &change_order, now);
        times.push(start.elapsed());
        assert_eq!(verdicts.len(), n * GATES);
        assert_eq!(failing(&verdicts).len(), n.div_ceil(10), "only the frozen Spaces fail");
    }
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (big, base, runs) = if bench { (1_000, 100, 21) } else { (50, 10, 1) };
    let baseline = time_entry(base, runs);
    let median = time_entry(big, runs);
    let gates_per_sec = (big * GATES) as f64 / median.as_secs_f64().max(1e-9);
    println!(
        "gates: prod entry over {big} spaces ({} gates): median {median:.2?}, {gates_per_sec:.0} gates/s; \
         baseline {base} spaces: {baseline:.2?}; ratio {:.1}x",
        big * GATES,
        median.as_secs_f64() / baseline.as_secs_f64().max(1e-9)
    );
}
