//! Rendering throughput of `layering::render` on a generated Deckhand document set.
//!
//! `cargo bench --bench layering` renders ~10,000 documents over three layers (an abstract
//! global chart per application, concrete region and site charts layering onto it, site charts
//! substituting a per-application passphrase plainly and through a pattern), with a ~1,000
//! document baseline in the same run, and reports documents/s (median of several runs), the
//! time ratio big/baseline (10x is linear) and peak memory (VmHWM). Target: >= 20,000
//! documents/s. Under `cargo test` it renders a small set once, so the bench cannot rot.

use changeflow::layering::{RenderOptions, render};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const REGIONS: usize = 4;
const SITES_PER_REGION: usize = 24;

/// Documents per application: a passphrase, a global chart, the regions and their sites.
const PER_APP: usize = 2 + REGIONS + REGIONS * SITES_PER_REGION;

fn chart(name: &str, layer: &str, labels: Value, selector: Option<Value>, data: Value) -> Value {
    let mut ld = json!({"layer": layer, "abstract": layer == "global"});
    if let Some(s) = selector {
        ld["parentSelector"] = s;
        ld["actions"] = json!([{"method": "merge", "path": "."}]);
    }
    json!({"schema": "armada/Chart/v1", "metadata": {"schema": "metadata/Document/v1", "name": name,
        "storagePolicy": "cleartext", "labels": labels, "layeringDefinition": ld}, "data": data})
}

/// About `target` documents; the input order is shuffled deterministically (sites first).
fn generate(target: usize) -> Vec<Value> {
    let apps = (target / PER_APP).max(1);
    let mut docs = vec![json!({"schema": "deckhand/LayeringPolicy/v1",
        "metadata": {"schema": "metadata/Control/v1", "name": "layering-policy"},
        "data": {"layerOrder": ["global", "region", "site"]}})];
    for a in 0..apps {
        let app = format!("app{a}");
        for r in 0..REGIONS {
            for s in 0..SITES_PER_REGION {
                let name = format!("{app}-r{r}-s{s}");
                let mut site = chart(
                    &name,
                    "site",
                    json!({"app": app, "site": name}),
                    Some(json!({"app": app, "region": format!("r{r}")})),
                    json!({"values": {"site": s, "replicas": 3, "url": "https://db:PASSWORD@db.local/"}}),
                );
                site["metadata"]["substitutions"] = json!([
                    {"src": {"schema": "deckhand/Passphrase/v1", "name": format!("{app}-password"), "path": "."},
                     "dest": [{"path": ".values.password"}, {"path": ".values.url", "pattern": "PASSWORD"}]}]);
                docs.push(site);
            }
            docs.push(chart(
                &format!("{app}-r{r}"),
                "region",
                json!({"app": app, "region": format!("r{r}")}),
                Some(json!({"app": app, "tier": "global"})),
                json!({"values": {"region": r, "image": {"tag": format!("1.{r}")}}}),
            ));
        }
        docs.push(chart(
            &app,
            "global",
            json!({"app": app, "tier": "global"}),
            None,
            json!({"values": {"image": {"repo": "registry/app", "tag": "1.0"}, "replicas": 1,
                "resources": {"cpu": "500m", "memory": "1Gi"}, "env": ["A=1", "B=2"]}}),
        ));
        docs.push(json!({"schema": "deckhand/Passphrase/v1", "metadata": {"schema": "metadata/Document/v1",
            "name": format!("{app}-password"), "storagePolicy": "cleartext",
            "layeringDefinition": {"layer": "global"}}, "data": format!("secret-{a}")}));
    }
    docs
}

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Median render time of `runs` renderings, the document count, and VmHWM afterwards.
fn measure(target: usize, runs: usize) -> (Duration, usize, u64) {
    let docs = generate(target);
    let mut times = vec![];
    for _ in 0..runs {
        let start = Instant::now();
        let out = render(&docs, &RenderOptions::default()).expect("the generated set renders");
        times.push(start.elapsed());
        // Abstract global charts are not returned.
        assert_eq!(out.len(), docs.len() - docs.len() / PER_APP);
        let site = out.iter().find(|d| d["metadata"]["name"] == "app0-r1-s2").unwrap();
        assert_eq!(site["data"]["values"]["url"], "https://db:secret-0@db.local/");
        assert_eq!(site["data"]["values"]["image"], json!({"repo": "registry/app", "tag": "1.1"}));
    }
    times.sort();
    (times[times.len() / 2], docs.len(), vm_hwm_kib())
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (big, base, runs) = if bench { (10_000, 1_000, 7) } else { (400, 100, 1) };
    let (base_time, base_docs, base_hwm) = measure(base, runs);
    let (time, docs, hwm) = measure(big, runs);
    let rate = |n: usize, t: Duration| n as f64 / t.as_secs_f64().max(1e-9);
    println!(
        "layering: {docs} documents in {time:.1?} ({:.0} documents/s, peak RSS {:.1} MiB); \
         baseline {base_docs} documents in {base_time:.1?} ({:.0} documents/s, peak RSS {:.1} MiB); \
         time ratio {:.1}x for {:.1}x the documents",
        rate(docs, time),
        hwm as f64 / 1024.0,
        rate(base_docs, base_time),
        base_hwm as f64 / 1024.0,
        time.as_secs_f64() / base_time.as_secs_f64().max(1e-9),
        docs as f64 / base_docs as f64,
    );
}
