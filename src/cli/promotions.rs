//! `changeflow promotion get|list|cancel`, `changeflow schedule …`, `changeflow backfill …` and
//! the queued form of `variant promote`, with per-Stage progress bars while waiting.

use super::changeorders::split_ref;
use super::client::{Client, enc};
use super::key_value;
use super::output::{self, Columns, Format};
use anyhow::{Result, bail};
use clap::Subcommand;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

pub const PROMOTION: Columns = &[
    ("ID", "/PromotionID"),
    ("CHANGE-ORDER", "/ChangeOrder"),
    ("STATE", "/State"),
    ("WAVE", "/Wave"),
    ("COUNTS", "/Counts"),
    ("SOURCE", "/Source"),
    ("REASON", "/StateReason"),
];

pub const TASK: Columns = &[
    ("SPACE", "/Space"),
    ("STAGE", "/Stage"),
    ("WAVE", "/Wave"),
    ("STATE", "/State"),
    ("ATTEMPTS", "/Attempts"),
    ("UNITS", "/UnitsChanged"),
    ("REASON", "/Reason"),
];

pub const SCHEDULE: Columns = &[
    ("SLUG", "/Slug"),
    ("CRON", "/Cron"),
    ("TIME-ZONE", "/TimeZone"),
    ("ACTION", "/Action"),
    ("NEXT", "/NextFireAt"),
    ("LAST", "/LastFiredAt"),
];

#[derive(Debug, Subcommand)]
pub enum PromotionCmd {
    /// A Promotion with each Space's task: state, attempts, and why it waits.
    Get {
        /// PromotionID, or SPACE/SLUG.
        id: String,
        /// Follow it until it ends, with progress bars.
        #[arg(long)]
        wait: bool,
    },
    /// Promotions, newest first.
    List {
        #[arg(long)]
        space: Option<String>,
        /// Only this ChangeOrder's (slug or ID).
        #[arg(long)]
        change_order: Option<String>,
    },
    /// Stop a running Promotion: queued and blocked tasks are cancelled.
    Cancel {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCmd {
    /// Promote a ChangeOrder on a cron schedule (one Promotion per tick, however many servers).
    Create {
        slug: String,
        #[arg(long)]
        space: String,
        /// Five fields (minute hour day-of-month month day-of-week) or six with seconds first,
        /// e.g. "0 9 * * MON-THU".
        #[arg(long)]
        cron: String,
        /// IANA time zone the expression is read in.
        #[arg(long, default_value = "UTC")]
        time_zone: String,
        /// What a tick does: promote (an Invoke ChangeOrder promoted runs its Invocation).
        #[arg(long, default_value = "promote")]
        action: String,
        /// SPACE/SLUG of the ChangeOrder.
        #[arg(long)]
        change_order: String,
        #[arg(long)]
        target_stage: Option<String>,
    },
    List {
        #[arg(long)]
        space: Option<String>,
    },
    Delete {
        slug: String,
        #[arg(long)]
        space: String,
    },
}

/// How a queued rollout runs (shared by `variant promote` and `backfill`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RolloutArgs {
    /// Spaces queued or running at once, across all workers (0: no cap).
    #[arg(long, default_value_t = 0)]
    pub max_in_flight: u32,
    /// Spaces started per second by each worker (0: no cap).
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Halt a wave after more than N failed Spaces, or more than N% of the wave ("3", "10%").
    #[arg(long)]
    pub failure_budget: Option<String>,
    /// How long tasks blocked by gates keep waiting, e.g. 24h [default: 7d].
    #[arg(long)]
    pub deadline: Option<String>,
}

impl RolloutArgs {
    fn body(&self) -> Result<Value> {
        let budget = match self.failure_budget.as_deref() {
            None => json!({}),
            Some(b) => match b.strip_suffix('%') {
                Some(p) => {
                    json!({"MaxFailedPercent": p.trim().parse::<f64>().map_err(|_| anyhow::anyhow!("--failure-budget '{b}': expected N or N%"))?})
                }
                None => {
                    json!({"MaxFailed": b.trim().parse::<u32>().map_err(|_| anyhow::anyhow!("--failure-budget '{b}': expected N or N%"))?})
                }
            },
        };
        Ok(json!({"MaxInFlight": self.max_in_flight, "Rate": self.rate, "FailureBudget": budget,
                  "Deadline": self.deadline}))
    }
}

/// `changeflow backfill`: roll a ChangeOrder (or a new Invoke ChangeOrder) out through the queue
/// and follow it. Re-running the same command resumes the same rollout.
#[derive(Debug, clap::Args)]
pub struct BackfillArgs {
    /// SPACE/SLUG of an existing ChangeOrder to roll out.
    #[arg(long, conflicts_with = "invocation", required_unless_present = "invocation")]
    pub change_order: Option<String>,
    /// Re-derive the ChangeOrder's scope first (Spaces added since it was created).
    #[arg(long, requires = "change_order")]
    pub refresh_spaces: bool,
    #[arg(long)]
    pub target_stage: Option<String>,
    /// SPACE/SLUG of an Invocation: creates an Invoke ChangeOrder in that Space and rolls it out.
    #[arg(long, requires = "where_space")]
    pub invocation: Option<String>,
    /// Which Spaces the Invocation runs in.
    #[arg(long)]
    pub where_space: Option<String>,
    /// Which Units in them (default: every Unit).
    #[arg(long)]
    pub where_unit: Option<String>,
    /// The Invocation's parameters.
    #[arg(long = "param", value_parser = key_value)]
    pub params: Vec<(String, String)>,
    /// Show what would run; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub rollout: RolloutArgs,
}

pub async fn run_promotion(c: &Client, out: Format, cmd: PromotionCmd) -> Result<()> {
    match cmd {
        PromotionCmd::Get { id, wait } => {
            if wait {
                return follow(c, out, &id).await;
            }
            let v = c.get(&format!("/v1/promotions/{}", enc(&id))).await?;
            print_promotion(&v, out);
        }
        PromotionCmd::List { space, change_order } => {
            let mut q = vec![];
            if let Some(s) = space {
                q.push(format!("space={}", enc(&s)));
            }
            if let Some(co) = change_order {
                q.push(format!("change_order={}", enc(&co)));
            }
            let v = c.get(&format!("/v1/promotions?{}", q.join("&"))).await?;
            output::print(&v, out, PROMOTION);
        }
        PromotionCmd::Cancel { id, reason } => {
            let v =
                c.post(&format!("/v1/promotions/{}/cancel", enc(&id)), &json!({"Reason": reason})).await?;
            print_promotion(&v, out);
        }
    }
    Ok(())
}

pub async fn run_schedule(c: &Client, out: Format, cmd: ScheduleCmd) -> Result<()> {
    let v = match cmd {
        ScheduleCmd::Create { slug, space, cron, time_zone, action, change_order, target_stage } => {
            let body = json!({"Slug": slug, "Cron": cron, "TimeZone": time_zone, "Action": action,
                              "ChangeOrder": change_order, "TargetStage": target_stage});
            c.post(&format!("/v1/spaces/{}/schedules", enc(&space)), &body).await?
        }
        ScheduleCmd::List { space } => match space {
            Some(s) if s != "*" => c.get(&format!("/v1/spaces/{}/schedules", enc(&s))).await?,
            _ => c.get("/v1/schedules").await?,
        },
        ScheduleCmd::Delete { slug, space } => {
            c.delete(&format!("/v1/spaces/{}/schedules/{}", enc(&space), enc(&slug))).await?;
            eprintln!("deleted schedule {space}/{slug}");
            return Ok(());
        }
    };
    output::print(&v, out, SCHEDULE);
    Ok(())
}

fn print_promotion(v: &Value, out: Format) {
    if out != Format::Table {
        output::print(v, out, PROMOTION);
        return;
    }
    print!("{}", output::table(std::slice::from_ref(v), PROMOTION));
    let tasks = v["Tasks"].as_array().cloned().unwrap_or_default();
    if !tasks.is_empty() {
        println!();
        print!("{}", output::table(&tasks, TASK));
    }
}

/// Requests a queued promotion; with `wait`, follows it to its end.
pub async fn request(
    c: &Client,
    out: Format,
    change_order: &str,
    mut body: Value,
    rollout: &RolloutArgs,
    wait: bool,
) -> Result<()> {
    let (base, co) = split_ref(change_order)?;
    if let (Value::Object(b), Value::Object(r)) = (&mut body, rollout.body()?) {
        b.extend(r);
    }
    let v = c.post(&format!("/v1/spaces/{}/changeorders/{}/promotions", enc(base), enc(co)), &body).await?;
    let id = v["PromotionID"].as_str().unwrap_or_default().to_string();
    if !wait {
        if out == Format::Table {
            print!("{}", output::table(std::slice::from_ref(&v), PROMOTION));
            eprintln!("queued: follow it with `changeflow promotion get {id} --wait`");
        } else {
            output::print(&v, out, PROMOTION);
        }
        return Ok(());
    }
    follow(c, out, &id).await
}

/// Polls a Promotion, drawing one progress bar per Stage (hidden when stderr is not a
/// terminal), until it ends; prints the table of Spaces and outcomes. Fails unless Completed.
pub async fn follow(c: &Client, out: Format, id: &str) -> Result<()> {
    let multi = MultiProgress::with_draw_target(if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style = ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {msg}")
        .expect("template parses")
        .progress_chars("=> ");
    let mut bars: BTreeMap<String, ProgressBar> = BTreeMap::new();
    let mut announced: BTreeMap<String, bool> = BTreeMap::new();
    loop {
        // Counts per wave only while polling: a large rollout's tasks are fetched once, at the end.
        let v = c.get(&format!("/v1/promotions/{}?tasks=false", enc(id))).await?;
        let mut by_stage: Vec<(String, usize, usize, usize)> = vec![];
        for w in v["Waves"].as_array().into_iter().flatten() {
            let stage = w["Stage"].as_str().filter(|s| !s.is_empty()).unwrap_or("spaces").to_string();
            let n = |k: &str| w["Counts"][k].as_u64().unwrap_or(0) as usize;
            let ended = n("Done") + n("Failed") + n("Cancelled");
            let total = w["Total"].as_u64().unwrap_or(0) as usize;
            match by_stage.iter_mut().find(|(s, ..)| *s == stage) {
                Some(e) => {
                    e.1 += total;
                    e.2 += ended;
                    e.3 += n("Blocked");
                }
                None => by_stage.push((stage, total, ended, n("Blocked"))),
            }
        }
        let running = v["State"] == "Running";
        for (pos, (stage, total, ended, blocked)) in by_stage.iter().enumerate() {
            let bar = bars.entry(stage.clone()).or_insert_with(|| {
                let b = multi.add(ProgressBar::new(0));
                b.set_style(style.clone());
                b.set_prefix(stage.clone());
                b
            });
            bar.set_length(*total as u64);
            bar.set_position(*ended as u64);
            bar.set_message(if *blocked > 0 { format!("{blocked} blocked by gates") } else { String::new() });
            // A Stage is over once a later one started (it may take several waves) or all ended.
            let over = ended == total && (!running || pos + 1 < by_stage.len());
            if over && !announced.get(stage).copied().unwrap_or(false) {
                announced.insert(stage.clone(), true);
                bar.finish();
                if multi.is_hidden() {
                    eprintln!("{stage}: {ended}/{total} spaces ended");
                }
            }
        }
        if v["State"] != "Running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let v = c.get(&format!("/v1/promotions/{}", enc(id))).await?;
    for b in bars.values() {
        b.finish();
    }
    let _ = multi.clear();
    print_promotion(&v, out);
    let state = v["State"].as_str().unwrap_or_default();
    if state != "Completed" {
        bail!(
            "promotion {} ended {state}: {}",
            v["Slug"].as_str().unwrap_or(id),
            v["StateReason"].as_str().unwrap_or_default()
        );
    }
    eprintln!("promotion {} completed", v["Slug"].as_str().unwrap_or(id));
    Ok(())
}

/// A stable, short name for the Invoke ChangeOrder a backfill creates, so re-running the same
/// command finds it.
fn backfill_slug(
    invocation: &str,
    where_space: &str,
    where_unit: &str,
    params: &[(String, String)],
) -> String {
    use sha2::{Digest, Sha256};
    let mut sorted = params.to_vec();
    sorted.sort();
    let key = format!("{invocation}\n{where_space}\n{where_unit}\n{sorted:?}");
    let digest = hex::encode(&Sha256::digest(key.as_bytes())[..5]);
    let name = invocation.rsplit('/').next().unwrap_or(invocation);
    let name: String = name.chars().take(30).collect();
    format!("backfill-{name}-{digest}")
}

pub async fn backfill(c: &Client, out: Format, a: BackfillArgs) -> Result<()> {
    let change_order = match (&a.change_order, &a.invocation) {
        (Some(co), _) => {
            let (base, slug) = split_ref(co)?;
            if a.refresh_spaces && !a.dry_run {
                c.patch(
                    &format!("/v1/spaces/{}/changeorders/{}", enc(base), enc(slug)),
                    &json!({"RefreshSpaces": true}),
                )
                .await?;
                eprintln!("refreshed the scope of {co}");
            }
            co.clone()
        }
        (None, Some(inv)) => {
            let (space, _) = split_ref(inv)?;
            let where_space = a.where_space.clone().unwrap_or_default();
            let where_unit = a.where_unit.clone().unwrap_or_default();
            let slug = backfill_slug(inv, &where_space, &where_unit, &a.params);
            let co = format!("{space}/{slug}");
            if a.dry_run {
                let spaces = c.get(&format!("/v1/spaces?where={}", enc(&where_space))).await?;
                let n = spaces.as_array().map_or(0, Vec::len);
                eprintln!("dry run: would create Invoke change order {co} running {inv} in {n} space(s):");
                output::print(&spaces, out, output::SPACE);
                return Ok(());
            }
            let params: BTreeMap<String, String> = a.params.iter().cloned().collect();
            let body = json!({"Slug": slug, "UpdateType": "Invoke", "Invocation": inv, "Parameters": params,
                              "WhereSpace": where_space, "WhereUnit": where_unit});
            match c.post(&format!("/v1/spaces/{}/changeorders", enc(space)), &body).await {
                Ok(_) => eprintln!("created Invoke change order {co}"),
                Err(e) if e.to_string().contains("already exists") => eprintln!("resuming change order {co}"),
                Err(e) => return Err(e),
            }
            co
        }
        (None, None) => bail!("give --change-order S/CO or --invocation S/I"),
    };
    if a.dry_run {
        let args = super::changeorders::PromoteArgs {
            space: None,
            change_order,
            dry_run: true,
            expected_plan: None,
            target_stage: a.target_stage,
            force: false,
            reason: None,
        };
        return super::changeorders::promote(c, out, args).await;
    }
    let key = format!("backfill:{change_order}:{}", a.target_stage.as_deref().unwrap_or(""));
    let body = json!({"TargetStage": a.target_stage, "IdempotencyKey": key});
    request(c, out, &change_order, body, &a.rollout, true).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backfill_names_are_stable_and_tell_inputs_apart() {
        let p = vec![("image".to_string(), "web:2".to_string()), ("a".to_string(), "b".to_string())];
        let mut q = p.clone();
        q.reverse();
        let one = backfill_slug("platform/set-image", "Labels.Env = 'prod'", "", &p);
        assert_eq!(
            one,
            backfill_slug("platform/set-image", "Labels.Env = 'prod'", "", &q),
            "order of --param"
        );
        assert!(one.starts_with("backfill-set-image-"), "{one}");
        assert_ne!(one, backfill_slug("platform/set-image", "Labels.Env = 'dev'", "", &p));
    }

    #[test]
    fn failure_budgets_parse_as_count_or_share() {
        let r = |b: &str| RolloutArgs { failure_budget: Some(b.into()), ..Default::default() }.body();
        assert_eq!(r("3").unwrap()["FailureBudget"], json!({"MaxFailed": 3}));
        assert_eq!(r("10%").unwrap()["FailureBudget"], json!({"MaxFailedPercent": 10.0}));
        assert!(r("lots").unwrap_err().to_string().contains("--failure-budget 'lots'"));
    }
}
