//! Promotions through the queue, on real SQLite and real Redis queues: waves, gates re-checked
//! on every attempt, failure budgets, aborts, duplicate and lost jobs, killed workers.

use crate::api::WEB;
use crate::helpers::{App, spawn_app_with};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const WORKFLOW: &str = r#"Stages:
  - Name: dev
    WhereSpace: "Labels.Stage = 'dev'"
  - Name: prod
    WhereSpace: "Labels.Stage = 'prod'"
    Prerequisites: [not-frozen]
CustomPrerequisites:
  - Name: not-frozen
    Expression: "cel:!('code-freeze' in Space.Annotations) || Space.Annotations['code-freeze'] != 'true'"
"#;

/// base (component shop, `units` Units) with `dev` dev Spaces and `prod` prod Spaces, all
/// variants of base; a workflow; the change written in base; ChangeOrder `bump`.
pub async fn fleet(app: &App, units: usize, dev: usize, prod: usize) {
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "ops"}))).await;
    app.ok("POST", "/v1/spaces", Some(json!({"Slug": "base", "Labels": {"Component": "shop"}}))).await;
    for u in 0..units {
        let data = WEB.replace("name: web", &format!("name: web{u}"));
        app.ok("POST", "/v1/spaces/base/units", Some(json!({"Slug": format!("web{u}"), "Data": data}))).await;
    }
    for (stage, n) in [("dev", dev), ("prod", prod)] {
        for i in 1..=n {
            let body = json!({"Slug": format!("{stage}-{i}"), "Labels": {"Stage": stage}});
            app.ok("POST", "/v1/spaces/base/variants", Some(body)).await;
        }
    }
    app.ok(
        "POST",
        "/v1/spaces/ops/changeworkflows",
        Some(json!({"Slug": "rollout", "Definition": WORKFLOW})),
    )
    .await;
    for u in 0..units {
        let data = WEB.replace("name: web", &format!("name: web{u}")).replace("web:1.0", "web:2.0");
        app.ok("PATCH", &format!("/v1/spaces/base/units/web{u}"), Some(json!({"Data": data}))).await;
    }
    app.ok(
        "POST",
        "/v1/spaces/base/changeorders",
        Some(json!({"Slug": "bump", "ChangeWorkflow": "ops/rollout"})),
    )
    .await;
}

pub const REQUEST: &str = "/v1/spaces/base/changeorders/bump/promotions";

/// Polls a Promotion until `done` holds for it (or panics after `limit`).
pub async fn wait_for(app: &App, id: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let p = app.ok("GET", &format!("/v1/promotions/{id}"), None).await;
        if done(&p) {
            return p;
        }
        assert!(start.elapsed() < limit, "promotion did not get there in {limit:?}: {p:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn wait_end(app: &App, id: &str) -> Value {
    wait_for(app, id, Duration::from_secs(90), |p| p["State"] != "Running").await
}

fn count(p: &Value, state: &str) -> u64 {
    p["Counts"][state].as_u64().unwrap_or(0)
}

/// Head revision of every Unit in `space`.
pub async fn heads(app: &App, space: &str) -> Vec<i64> {
    let units = app.ok("GET", &format!("/v1/spaces/{space}/units"), None).await;
    units.as_array().unwrap().iter().map(|u| u["HeadRevisionNum"].as_i64().unwrap()).collect()
}

async fn request(app: &App, body: Value) -> Value {
    let r = app.admin("POST", REQUEST, Some(body)).await;
    assert_eq!(r.status, 202, "{}", r.text);
    r.body
}

async fn rollout_completes(queue: &str) {
    let app = spawn_app_with("sqlite", queue, |_| {}).await;
    fleet(&app, 3, 2, 4).await;
    let p = request(&app, json!({"TargetStage": "prod"})).await;
    assert_eq!(p["State"], "Running", "the request returns at once: {p:#}");
    assert_eq!(p["Stages"].as_array().unwrap().len(), 2);
    let id = p["PromotionID"].as_str().unwrap().to_string();
    let p = wait_end(&app, &id).await;
    assert_eq!(p["State"], "Completed", "{p:#}");
    assert_eq!(count(&p, "Done"), 6, "{p:#}");
    let tasks = p["Tasks"].as_array().unwrap();
    // dev is wave 1, prod wave 2: every prod task starts after every dev task ended.
    let dev_end =
        tasks.iter().filter(|t| t["Stage"] == "dev").map(|t| t["FinishedAt"].as_str().unwrap()).max();
    let prod_start =
        tasks.iter().filter(|t| t["Stage"] == "prod").map(|t| t["StartedAt"].as_str().unwrap()).min();
    assert!(dev_end < prod_start, "waves overlap: {dev_end:?} vs {prod_start:?}");
    assert!(tasks.iter().all(|t| t["UnitsChanged"] == 3), "{p:#}");
    for s in ["dev-1", "dev-2", "prod-1", "prod-4"] {
        assert_eq!(heads(&app, s).await, vec![2, 2, 2], "{s}: one merge per Unit");
    }
    let co = app.ok("GET", "/v1/spaces/base/changeorders/bump", None).await;
    assert_eq!(co["Stage"], "Completed", "{co:#}");

    // A job delivered again (same task, old and new keys) changes nothing.
    let server = app.server.as_ref().unwrap();
    for t in tasks {
        let task: uuid::Uuid = t["TaskID"].as_str().unwrap().parse().unwrap();
        server.jobs.queue.enqueue(task, &format!("{task}:1")).await.unwrap();
        server.jobs.queue.enqueue(task, &format!("again-{task}")).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(server.jobs.queue.depth().await.unwrap(), 0, "the duplicates were taken");
    for s in ["dev-1", "dev-2", "prod-1", "prod-2", "prod-3", "prod-4"] {
        assert_eq!(heads(&app, s).await, vec![2, 2, 2], "{s}: a second delivery merged nothing");
    }
    let again = app.ok("GET", &format!("/v1/promotions/{id}"), None).await;
    let attempts =
        |p: &Value| p["Tasks"].as_array().unwrap().iter().map(|t| t["Attempts"].clone()).collect::<Vec<_>>();
    assert_eq!(attempts(&again), attempts(&p), "a finished task is not attempted again");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_runs_wave_by_wave_on_the_sqlite_queue() {
    rollout_completes("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_runs_wave_by_wave_on_the_redis_queue() {
    rollout_completes("redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_that_closes_mid_wave_holds_the_rest_until_it_reopens() {
    let app = spawn_app_with("sqlite", "sqlite", |_| {}).await;
    fleet(&app, 1, 1, 6).await;
    // One Space at a time, two per second: the prod wave takes about three seconds.
    let p = request(&app, json!({"TargetStage": "prod", "MaxInFlight": 1, "Rate": 2})).await;
    let id = p["PromotionID"].as_str().unwrap().to_string();
    wait_for(&app, &id, Duration::from_secs(30), |p| {
        p["Tasks"].as_array().unwrap().iter().filter(|t| t["Stage"] == "prod" && t["State"] == "Done").count()
            >= 2
    })
    .await;
    app.ok("PATCH", "/v1/spaces/dev-1", Some(json!({"Annotations": {"code-freeze": "true"}}))).await;
    let held = wait_for(&app, &id, Duration::from_secs(30), |p| count(p, "Blocked") == 1).await;
    let blocked = held["Tasks"].as_array().unwrap().iter().find(|t| t["State"] == "Blocked").unwrap().clone();
    assert!(blocked["Reason"].as_str().unwrap().contains("blocked by not-frozen on dev-1"), "{blocked:#}");
    assert_eq!(blocked["FailingGates"].as_array().unwrap().len(), 1);
    let done_then = count(&held, "Done");
    // Held: two more seconds (several retries) and nothing else got the change.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = app.ok("GET", &format!("/v1/promotions/{id}"), None).await;
    assert_eq!(count(&still, "Done"), done_then, "{still:#}");
    assert_eq!(still["State"], "Running");
    let retried =
        still["Tasks"].as_array().unwrap().iter().find(|t| t["TaskID"] == blocked["TaskID"]).unwrap();
    assert!(retried["Attempts"].as_u64().unwrap() >= 2, "gates re-checked on each retry: {retried:#}");
    let untouched: usize = {
        let mut n = 0;
        for i in 1..=6 {
            if heads(&app, &format!("prod-{i}")).await == vec![1] {
                n += 1;
            }
        }
        n
    };
    assert_eq!(untouched as u64, 7 - done_then, "the Spaces not done are untouched");
    // Reopen: the rest follows.
    app.ok("PATCH", "/v1/spaces/dev-1", Some(json!({"Annotations": {"code-freeze": "false"}}))).await;
    let p = wait_end(&app, &id).await;
    assert_eq!(p["State"], "Completed", "{p:#}");
    assert_eq!(count(&p, "Done"), 7);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_budget_halts_the_wave_and_leaves_the_rest_untouched() {
    let app = spawn_app_with("sqlite", "sqlite", |_| {}).await;
    fleet(&app, 1, 1, 8).await;
    // ann may write base, dev-1 and prod-1..3 only: five prod Spaces will fail (permanently).
    let grants = ["base=Edit", "dev-1=Edit", "prod-1=Edit", "prod-2=Edit", "prod-3=Edit"];
    app.ok("POST", "/v1/users", Some(json!({"Slug": "ann", "Grants": grants}))).await;
    let token =
        app.ok("POST", "/v1/users/ann/tokens", Some(json!({}))).await["Token"].as_str().unwrap().to_string();
    let body = json!({"TargetStage": "prod", "MaxInFlight": 1, "FailureBudget": {"MaxFailed": 1}});
    let r = app.call("POST", REQUEST, Some(&token), Some(body)).await;
    assert_eq!(r.status, 202, "{}", r.text);
    let id = r.body["PromotionID"].as_str().unwrap().to_string();
    let p = wait_end(&app, &id).await;
    assert_eq!(p["State"], "Halted", "{p:#}");
    assert!(p["StateReason"].as_str().unwrap().contains("over the failure budget"), "{p:#}");
    assert_eq!(count(&p, "Failed"), 2, "halted at the second failure: {p:#}");
    let failed = p["Tasks"].as_array().unwrap().iter().find(|t| t["State"] == "Failed").unwrap();
    assert!(failed["Reason"].as_str().unwrap().contains("needs Edit permission"), "{failed:#}");
    let pending: Vec<String> = p["Tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["State"] == "Pending")
        .map(|t| t["Space"].as_str().unwrap().to_string())
        .collect();
    assert!(!pending.is_empty(), "some Spaces never started: {p:#}");
    for s in &pending {
        assert_eq!(heads(&app, s).await, vec![1], "{s} is untouched");
    }
    // Nothing more happens after the halt.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = app.ok("GET", &format!("/v1/promotions/{id}"), None).await;
    assert_eq!(later["Counts"], p["Counts"]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_change_order_stops_its_queued_tasks() {
    let app = spawn_app_with("sqlite", "redis", |_| {}).await;
    fleet(&app, 1, 1, 3).await;
    app.ok("PATCH", "/v1/spaces/dev-1", Some(json!({"Annotations": {"code-freeze": "true"}}))).await;
    let p = request(&app, json!({"TargetStage": "prod"})).await;
    let id = p["PromotionID"].as_str().unwrap().to_string();
    let held = wait_for(&app, &id, Duration::from_secs(30), |p| count(p, "Blocked") == 3).await;
    assert_eq!(count(&held, "Done"), 1, "dev went through: {held:#}");
    app.ok("PATCH", "/v1/spaces/base/changeorders/bump", Some(json!({"AbortedReason": "bad image"}))).await;
    let p = wait_end(&app, &id).await;
    assert_eq!(p["State"], "Cancelled", "{p:#}");
    assert!(p["StateReason"].as_str().unwrap().contains("aborted: bad image"), "{p:#}");
    assert_eq!(count(&p, "Cancelled"), 3, "{p:#}");
    // Unfreezing changes nothing now.
    app.ok("PATCH", "/v1/spaces/dev-1", Some(json!({"Annotations": {"code-freeze": "false"}}))).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for s in ["prod-1", "prod-2", "prod-3"] {
        assert_eq!(heads(&app, s).await, vec![1], "{s} never took the aborted change");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_promotion_requests_are_refused_and_write_nothing() {
    let app = spawn_app_with("sqlite", "sqlite", |_| {}).await;
    fleet(&app, 1, 1, 1).await;
    for (body, field) in [
        (json!({"TargetStage": "qa"}), "TargetStage"),
        (json!({"Force": true}), "Reason"),
        (json!({"Rate": -2}), "Rate"),
        (json!({"Deadline": "tomorrow"}), "Deadline"),
        (json!({"FailureBudget": {"MaxFailedPercent": 250}}), "FailureBudget.MaxFailedPercent"),
        (json!({"Space": "ops"}), "Space"),
        (json!({"Bogus": 1}), ""),
    ] {
        let r = app.admin("POST", REQUEST, Some(body.clone())).await;
        assert!(r.status == 400 || r.status == 422, "{body}: {} {}", r.status, r.text);
        if !field.is_empty() {
            assert_eq!(r.body["field"], field, "{body}: {}", r.text);
        }
    }
    let all = app.ok("GET", "/v1/promotions", None).await;
    assert_eq!(all.as_array().unwrap().len(), 0, "nothing written: {all:#}");
    let r = app.admin("GET", "/v1/promotions/no-such", None).await;
    assert_eq!(r.status, 404);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_a_promotion_and_metrics_show_the_work() {
    let app = spawn_app_with("sqlite", "sqlite", |_| {}).await;
    fleet(&app, 1, 1, 2).await;
    app.ok("PATCH", "/v1/spaces/dev-1", Some(json!({"Annotations": {"code-freeze": "true"}}))).await;
    let p = request(&app, json!({"TargetStage": "prod"})).await;
    let id = p["PromotionID"].as_str().unwrap().to_string();
    wait_for(&app, &id, Duration::from_secs(30), |p| count(p, "Blocked") == 2).await;
    let c =
        app.ok("POST", &format!("/v1/promotions/{id}/cancel"), Some(json!({"Reason": "not today"}))).await;
    assert_eq!(c["State"], "Cancelled");
    assert!(c["StateReason"].as_str().unwrap().contains("not today"));
    assert_eq!(count(&c, "Cancelled"), 2, "{c:#}");
    let again = app.admin("POST", &format!("/v1/promotions/{id}/cancel"), Some(json!({}))).await;
    assert_eq!(again.status, 422, "{}", again.text);
    let m = app.http.get(format!("{}/metrics", app.url)).send().await.unwrap().text().await.unwrap();
    assert!(m.contains("changeflow_jobs_total{outcome=\"done\"}"), "{m}");
    assert!(m.contains("changeflow_gate_verdicts_total{result=\"closed\"}"), "{m}");
    assert!(m.contains("changeflow_queue_depth"), "{m}");
    let list = app.ok("GET", "/v1/promotions?change_order=bump", None).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    app.stop().await;
}

/// In `ops` (which must exist) the Invocation `bump-image` (set-image of `web` to parameter
/// `image`), and three Spaces `edge-0..2` labelled `Fleet=edge`, each with its own Unit `web`.
pub async fn edge_fleet(app: &App) {
    let inv = json!({"Slug": "bump-image", "Parameters": [{"Name": "image", "DataType": "String", "Required": true}],
                     "FunctionInvocations": [{"FunctionName": "set-image", "Arguments": [{"Value": "web"}, {"Value": "{{ .image }}"}]}]});
    app.ok("POST", "/v1/spaces/ops/invocations", Some(inv)).await;
    for i in 0..3 {
        let slug = format!("edge-{i}");
        app.ok("POST", "/v1/spaces", Some(json!({"Slug": slug, "Labels": {"Fleet": "edge"}}))).await;
        app.ok("POST", &format!("/v1/spaces/{slug}/units"), Some(json!({"Slug": "web", "Data": WEB}))).await;
    }
}

/// Every prod Space's Units were merged exactly once.
async fn merged_once(app: &App, units: usize, prod: usize) {
    for i in 1..=prod {
        assert_eq!(heads(app, &format!("prod-{i}")).await, vec![2; units], "prod-{i}: each Unit merged once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_redis_mid_rollout_loses_nothing() {
    // A Redis database of its own, so flushing it touches no other test's queue.
    let url = format!("{}/9", crate::helpers::redis_url().trim_end_matches('/'));
    let app = spawn_app_with("sqlite", "redis", |o| {
        o.queue = Some(url.clone());
        // One job in hand at a time: the rest wait in Redis when it is flushed.
        o.jobs.concurrency = 1;
    })
    .await;
    fleet(&app, 3, 1, 12).await;
    let p = request(&app, json!({"TargetStage": "prod", "Rate": 4})).await;
    let id = p["PromotionID"].as_str().unwrap().to_string();
    wait_for(&app, &id, Duration::from_secs(30), |p| count(p, "Done") >= 4).await;
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("FLUSHDB").query_async(&mut conn).await.unwrap();
    let p = wait_end(&app, &id).await;
    assert_eq!(p["State"], "Completed", "{p:#}");
    assert_eq!(count(&p, "Done"), 13);
    assert!(requeued(&p), "the reconciler queued lost tasks again: {p:#}");
    merged_once(&app, 3, 12).await;
    app.stop().await;
}

/// Some task was queued again (by the reconciler: a lost job or a lapsed lease).
fn requeued(p: &Value) -> bool {
    p["Tasks"].as_array().unwrap().iter().any(|t| t["Generation"].as_u64().unwrap() >= 2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_wave_is_replaced_and_nothing_merges_twice() {
    // The fleet set-up: store on PostgreSQL, queue on Redis, workers in their own processes.
    let app = spawn_app_with("postgres", "redis", |o| o.worker = false).await;
    let (db, queue_name) = {
        let s = app.server.as_ref().unwrap();
        (s.db_url.clone(), s.queue_name.clone())
    };
    fleet(&app, 3, 1, 12).await;
    let worker = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_changeflow"))
            .args([
                "worker",
                "--db",
                &db,
                "--queue",
                &crate::helpers::redis_url(),
                "--queue-name",
                &queue_name,
            ])
            .args(["--lease-seconds", "2", "--reconcile-seconds", "1"])
            .env("RUST_LOG", "changeflow=warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut first = worker();
    let p = request(&app, json!({"TargetStage": "prod", "Rate": 4})).await;
    let id = p["PromotionID"].as_str().unwrap().to_string();
    wait_for(&app, &id, Duration::from_secs(60), |p| count(p, "Done") >= 4).await;
    first.kill().unwrap(); // SIGKILL: no chance to release anything
    first.wait().unwrap();
    let mut second = worker();
    let p = wait_end(&app, &id).await;
    second.kill().unwrap();
    second.wait().unwrap();
    assert_eq!(p["State"], "Completed", "{p:#}");
    assert_eq!(count(&p, "Done"), 13);
    assert!(requeued(&p), "tasks held by the killed worker were reclaimed: {p:#}");
    merged_once(&app, 3, 12).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_seen_by_two_servers_fires_once_per_tick() {
    let app = spawn_app_with("postgres", "redis", |_| {}).await;
    let (db, queue_name) = {
        let s = app.server.as_ref().unwrap();
        (s.db_url.clone(), s.queue_name.clone())
    };
    let dir = tempfile::tempdir().unwrap();
    let mut opts = changeflow::server::ServeOptions::embedded(dir.path().to_path_buf());
    opts.db = Some(db);
    opts.queue = Some(crate::helpers::redis_url());
    opts.queue_name = queue_name;
    opts.jobs = crate::helpers::fast_jobs();
    let twin = changeflow::server::start(opts).await.unwrap();
    fleet(&app, 1, 1, 1).await;
    for (body, field) in [
        (json!({"Slug": "s", "Cron": "0 9 * *", "ChangeOrder": "base/bump"}), "Cron"),
        (
            json!({"Slug": "s", "Cron": "0 9 * * *", "TimeZone": "Mars/Base", "ChangeOrder": "base/bump"}),
            "TimeZone",
        ),
        (
            json!({"Slug": "s", "Cron": "0 9 * * *", "ChangeOrder": "base/bump", "TargetStage": "qa"}),
            "TargetStage",
        ),
    ] {
        let r = app.admin("POST", "/v1/spaces/base/schedules", Some(body)).await;
        assert_eq!((r.status, r.body["field"].as_str()), (400, Some(field)), "{}", r.text);
    }
    let start = Instant::now();
    let s = app
        .ok(
            "POST",
            "/v1/spaces/base/schedules",
            Some(json!({"Slug": "every-second", "Cron": "* * * * * *", "TimeZone": "Europe/Berlin",
                        "ChangeOrder": "base/bump", "TargetStage": "prod"})),
        )
        .await;
    assert!(s["NextFireAt"].is_string(), "{s:#}");
    tokio::time::sleep(Duration::from_millis(3500)).await;
    app.ok("DELETE", "/v1/spaces/base/schedules/every-second", None).await;
    let elapsed = start.elapsed().as_secs() + 1;
    let list = app.ok("GET", "/v1/promotions", None).await;
    let fired: Vec<&Value> =
        list.as_array().unwrap().iter().filter(|p| p["Source"] == "schedule:every-second").collect();
    assert!(fired.len() >= 2, "the schedule fired: {list:#}");
    assert!(
        fired.len() as u64 <= elapsed,
        "{} promotions in {elapsed} s from two servers: a tick fired twice",
        fired.len()
    );
    // The first tick's promotion did the work; both stages of the fleet took the change.
    assert_eq!(heads(&app, "prod-1").await, vec![2]);
    twin.stop().await.unwrap();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfills_follow_their_rollout_and_resume_when_run_again() {
    let app = spawn_app_with("sqlite", "sqlite", |_| {}).await;
    fleet(&app, 2, 1, 3).await;
    edge_fleet(&app).await;
    // Frozen: the prod wave will wait.
    app.ok("PATCH", "/v1/spaces/dev-1", Some(json!({"Annotations": {"code-freeze": "true"}}))).await;
    let (url, token) = (app.url.clone(), app.token.clone());
    let cli = move |args: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_changeflow"));
        c.args(args).env("CHANGEFLOW_SERVER", &url).env("CHANGEFLOW_TOKEN", &token);
        c
    };
    let run = |c: &mut std::process::Command| c.output().unwrap();
    let backfill =
        ["backfill", "--change-order", "base/bump", "--target-stage", "prod", "--max-in-flight", "2"];
    // Interrupted while prod is blocked (as Ctrl-C or a crash would): the rollout goes on.
    let mut first = cli(&backfill)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let list = || async {
        let all = app.ok("GET", "/v1/promotions", None).await;
        all.as_array().unwrap().clone()
    };
    let start = Instant::now();
    loop {
        let ps = list().await;
        if ps.len() == 1 && count(&ps[0], "Blocked") == 2 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{ps:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    first.kill().unwrap();
    first.wait().unwrap();
    app.ok("PATCH", "/v1/spaces/dev-1", Some(json!({"Annotations": {"code-freeze": "false"}}))).await;
    // The same command again attaches to the same Promotion and follows it to its end.
    let mut c = cli(&backfill);
    c.args(["-o", "json"]);
    let out = tokio::task::spawn_blocking(move || run(&mut c)).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(p["State"], "Completed", "{p:#}");
    assert_eq!(list().await.len(), 1, "resumed, not started again");
    assert!(String::from_utf8_lossy(&out.stderr).contains("prod: 3/3 spaces ended"));
    merged_once(&app, 2, 3).await;

    // An Invocation over --where-space: a dry run writes nothing; then the rollout; then again.
    let invoke = [
        "backfill",
        "--invocation",
        "ops/bump-image",
        "--where-space",
        "Labels.Fleet = 'edge'",
        "--param",
        "image=web:9",
    ];
    let mut dry = cli(&invoke);
    dry.arg("--dry-run");
    let out = tokio::task::spawn_blocking(move || run(&mut dry)).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("edge-2"));
    assert_eq!(app.ok("GET", "/v1/spaces/ops/changeorders", None).await.as_array().unwrap().len(), 0);
    for round in 0..2 {
        let mut c = cli(&invoke);
        let out = tokio::task::spawn_blocking(move || run(&mut c)).await.unwrap();
        assert!(out.status.success(), "round {round}: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(app.ok("GET", "/v1/spaces/ops/changeorders", None).await.as_array().unwrap().len(), 1);
    for i in 0..3 {
        let r = app.admin("GET", &format!("/v1/spaces/edge-{i}/units/web/data"), None).await;
        assert!(r.text.contains("image: web:9"), "edge-{i}: {}", r.text);
        assert_eq!(heads(&app, &format!("edge-{i}")).await, vec![2], "edge-{i}: invoked once");
    }
    app.stop().await;
}
