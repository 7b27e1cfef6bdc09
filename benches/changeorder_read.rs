//! Reading a ChangeOrder's derived State over a large fleet, on the embedded SQLite store.
//!
//! `cargo bench --bench changeorder_read` builds 10,000 Spaces x 10 Units (and a 100-Space
//! baseline in the same run), then times `view_change_order`. Under `cargo test` it runs a small
//! fleet once, so the bench cannot rot.

#[path = "../tests/it/fleet.rs"]
mod fleet;

use changeflow::model::{ChangeOrder, Space};
use changeflow::store::Store;
use std::time::{Duration, Instant};

async fn time_reads(spaces: usize, units: usize, runs: usize) -> (Duration, u64) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(&format!("sqlite://{}", dir.path().join("bench.db").display())).await.unwrap();
    let built = Instant::now();
    fleet::build(&store, spaces, units, spaces / 2).await;
    eprintln!("  built {spaces} spaces x {units} units in {:.1?}", built.elapsed());
    let mut times = vec![];
    let mut queries = 0;
    for _ in 0..runs {
        let mut tx = store.read().await.unwrap();
        let base = tx.find::<Space>(None, "base").await.unwrap().unwrap();
        let co = tx.find::<ChangeOrder>(Some(base.SpaceID), "fleet-co").await.unwrap().unwrap();
        let start = Instant::now();
        let before = tx.query_count();
        let view = changeflow::ops::view_change_order(&mut tx, co).await.unwrap();
        times.push(start.elapsed());
        queries = tx.query_count() - before;
        assert_eq!(view.ResolvedSpaceIDs.len(), spaces / 2 + 1);
    }
    times.sort();
    (times[times.len() / 2], queries)
}

#[tokio::main]
async fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (big, base, runs) = if bench { ((10_000, 10), (100, 10), 11) } else { ((200, 2), (20, 2), 1) };
    let (baseline, _) = time_reads(base.0, base.1, runs).await;
    let (median, queries) = time_reads(big.0, big.1, runs).await;
    println!(
        "changeorder_read: {} spaces x {} units: median {:.1?} ({queries} queries); baseline {} spaces x {} units: {:.1?}; ratio {:.1}x",
        big.0,
        big.1,
        median,
        base.0,
        base.1,
        baseline,
        median.as_secs_f64() / baseline.as_secs_f64().max(1e-9)
    );
}
