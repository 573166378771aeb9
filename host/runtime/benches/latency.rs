//! How long a change waits, side by side: many existing CRs over many CRDs and namespaces, a
//! steady stream of spec changes, and for each contender
//! - the time from its spawn to a CR created just after it being Ready, with every existing
//!   CR still to reconcile, and to all of them Ready;
//! - after each of a few restarts with every CR settled (the initial list's work is all
//!   resync), the time from the new spawn to a CR created just after it being Ready;
//! - per change, the time from the benchmark's write to a watch seeing the CR Ready at that
//!   generation (the reconcile latency, on the benchmark's own clock);
//! - its own histogram of the queue latency: `orkestra_queue_latency_seconds` (user changes)
//!   for ork, `workqueue_queue_duration_seconds` for controller-runtime (client-go's, from
//!   an item's add to a worker's get), scraped from each one's `/metrics` before and after
//!   the stream of changes, so only the stream's items count.
//!
//! The work is the converge benchmark's: one ConfigMap and a Ready status per CR, 10
//! concurrent reconciles per CRD for each contender. Each contender has CRDs of its own (a
//! group of its own, the same kinds and namespaces), seeded before it is spawned; its clock
//! starts before its process does; its CRDs are deleted, and their ConfigMaps collected,
//! before the next one starts.
//!
//! Needs the local control plane (`ork control-plane install`) and Go for the
//! controller-runtime contender (left out, and said so, without it).
//! Run: `cargo bench -p orkestra --bench latency`, sized by `ORK_LATENCY_OBJECTS` (50000),
//! `ORK_LATENCY_CRDS` (20), `ORK_LATENCY_NAMESPACES` (100), `ORK_LATENCY_RATE` (changes per
//! second, 100), `ORK_LATENCY_SECONDS` (of changes, 60) and `ORK_LATENCY_RESTARTS` (3);
//! `ORK_LATENCY_CONTENDERS=ork` (or `controller-runtime`) runs one alone; `BENCH_TRACE=1` with
//! `RUST_LOG` (as `orkestra=info`) shows ork's own log, with times since its start.

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks name the objects they create; no tenant input reaches these calls"
)]

mod common;

#[global_allocator]
static ALLOCATOR: common::allocator::Chosen = common::allocator::Chosen;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use orkestra_control_plane::{ControlPlane, Options};
use parking_lot::Mutex;
use serde_json::json;

use common::{
    Start, WORK, WORKERS, build_controller_runtime, client, is_ready, peak_rss_kib, reported, spawn, until_stdin_closes,
};

/// How long the changes still outstanding when the stream ends may take.
const DRAIN: Duration = Duration::from_secs(30);
/// How long a contender may take to make every existing CR Ready.
const PATIENCE: Duration = Duration::from_secs(1800);

/// The run's size.
struct Plan {
    objects: usize,
    crds: usize,
    namespaces: usize,
    rate: u32,
    seconds: u64,
    restarts: usize,
}

impl Plan {
    fn from_env() -> Self {
        let read = |name: &str, default: u64| -> u64 {
            std::env::var(name)
                .ok()
                .map(|v| v.trim().parse().unwrap_or_else(|_| panic!("{name}: a number")))
                .unwrap_or(default)
        };
        Self {
            objects: read("ORK_LATENCY_OBJECTS", 50_000) as usize,
            crds: read("ORK_LATENCY_CRDS", 20).max(1) as usize,
            namespaces: read("ORK_LATENCY_NAMESPACES", 100).max(1) as usize,
            rate: read("ORK_LATENCY_RATE", 100).max(1) as u32,
            seconds: read("ORK_LATENCY_SECONDS", 60),
            restarts: read("ORK_LATENCY_RESTARTS", 3).max(1) as usize,
        }
    }

    fn kinds(&self) -> Vec<String> {
        (0..self.crds).map(|k| format!("Item{k}")).collect()
    }

    fn namespace(&self, i: usize) -> String {
        format!("lat-{}", i % self.namespaces)
    }

    /// Object `i`: its kind (by index) and where it is.
    fn object(&self, i: usize) -> (usize, String, String) {
        (i % self.crds, self.namespace(i / self.crds), format!("o{i}"))
    }
}

/// Each contender's CRDs are a group of its own.
fn group(which: &str) -> String {
    format!("{which}.latency.orkestra.io")
}

fn resource(group: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, "v1", kind),
        &format!("{}s", kind.to_lowercase()),
    )
}

/// One CRD per kind, each making a ConfigMap named after its CR and a Ready status.
fn katalog_text(group: &str, kinds: &[String]) -> String {
    let mut text =
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {name: latency}\nspec:\n  crds:\n".to_string();
    for kind in kinds {
        let plural = format!("{}s", kind.to_lowercase());
        text.push_str(&format!(
            "    {}:
      apiTypes: {{group: {group}, version: v1, kind: {kind}, plural: {plural}}}
{WORK}",
            kind.to_lowercase()
        ));
    }
    text
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = common::tokio();
    match args.iter().position(|a| a == "--phase") {
        Some(at) => runtime.block_on(ork(&args[at + 2])),
        None => runtime.block_on(compare()),
    }
}

/// The ork contender, in a child process: the runtime on the group's kinds, its Live API on
/// `BENCH_METRICS_ADDR`, until stdin closes; then its peak RSS.
async fn ork(group: &str) {
    // Where its start-up spends its time, when asked (its stderr is passed through then).
    if std::env::var_os("BENCH_TRACE").is_some() {
        tracing_subscriber::fmt()
            .with_timer(tracing_subscriber::fmt::time::uptime())
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let kubeconfig = PathBuf::from(std::env::var("KUBECONFIG").expect("KUBECONFIG"));
    let client = client(&kubeconfig, "ork").await;
    let kinds: Vec<String> = std::env::var("BENCH_KINDS")
        .expect("BENCH_KINDS")
        .split(',')
        .map(String::from)
        .collect();
    let katalog =
        orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text(group, &kinds))]).expect("the Katalog");
    let host = orkestra::Runtime::new(client, &katalog).expect("compile");
    let addr = std::env::var("BENCH_METRICS_ADDR").expect("BENCH_METRICS_ADDR");
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("the metrics port");
    let router = orkestra::live::router(host.inspect(), None, orkestra::live::Auth::open());
    tokio::spawn(orkestra::live::serve(listener, router, None));
    let running = tokio::spawn(host.run(std::future::pending()));
    until_stdin_closes().await;
    running.abort();
    println!("peak_rss_kib={}", peak_rss_kib());
}

/// A free port on loopback, for a contender's `/metrics`.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    listener.local_addr().expect("its address").to_string()
}

/// Writes of spec changes not yet seen Ready: key → (generation written, when).
type Pending = Arc<Mutex<HashMap<String, (i64, Instant)>>>;

/// What the watches saw: readiness by key (the kind's index and the CR's key), and the
/// latencies of the changes seen through.
#[derive(Default)]
struct Seen {
    ready: HashMap<(usize, String), bool>,
    latencies: Vec<Duration>,
    /// When each CR created after a spawn (by name) was first Ready.
    fresh: HashMap<String, Instant>,
}

/// Watches every kind of `group` in every namespace, keeping `seen` current.
fn watch(watching: &kube::Client, group: &str, kinds: &[String], pending: Pending, seen: Arc<Mutex<Seen>>) {
    for (k, kind) in kinds.iter().enumerate() {
        let crs = Api::<DynamicObject>::all_with(watching.clone(), &resource(group, kind));
        let (pending, seen) = (pending.clone(), seen.clone());
        tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(crs, watcher::Config::default()));
            while let Ok(Some(event)) = events.try_next().await {
                let (watcher::Event::Apply(cr) | watcher::Event::InitApply(cr)) = event else {
                    continue;
                };
                let key = format!(
                    "{}/{}",
                    cr.metadata.namespace.clone().unwrap_or_default(),
                    cr.metadata.name.clone().unwrap_or_default()
                );
                let ready = is_ready(&cr.data);
                let observed = cr.data["status"]["observedGeneration"].as_i64().unwrap_or(0);
                let now = Instant::now();
                let mut seen = seen.lock();
                let name = cr.metadata.name.clone().unwrap_or_default();
                if ready && k == 0 && name.starts_with("fresh") {
                    seen.fresh.entry(name).or_insert(now);
                }
                seen.ready.insert((k, key.clone()), ready);
                let done = {
                    let mut pending = pending.lock();
                    let change = format!("{k}:{key}");
                    let through = pending
                        .get(&change)
                        .is_some_and(|(generation, _)| ready && observed >= *generation);
                    through.then(|| pending.remove(&change)).flatten()
                };
                if let Some((_, written)) = done {
                    seen.latencies.push(now.duration_since(written));
                }
            }
        });
    }
}

/// Creates the plan's objects in `group`.
async fn seed(setup: &kube::Client, plan: &Plan, group: &str, kinds: &[String]) {
    futures::stream::iter(0..plan.objects)
        .for_each_concurrent(50, |i| async move {
            let (k, namespace, name) = plan.object(i);
            let crs = Api::<DynamicObject>::namespaced_with(setup.clone(), &namespace, &resource(group, &kinds[k]));
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": format!("{group}/v1"), "kind": kinds[k],
                "metadata": {"name": name}, "spec": {"value": "v0"},
            }))
            .expect("an object");
            crs.create(&PostParams::default(), &object)
                .await
                .expect("create an object");
        })
        .await;
}

/// The cumulative buckets (upper bound, count) of the histogram `name` in an exposition,
/// summed over every series whose labels contain `selector`.
fn buckets(text: &str, name: &str, selector: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{");
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with(&prefix) && l.contains(selector)) {
        let Some(le) = line.split("le=\"").nth(1).and_then(|rest| rest.split('"').next()) else {
            continue;
        };
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap_or(f64::NAN)
        };
        let count: f64 = line.rsplit(' ').next().and_then(|c| c.parse().ok()).unwrap_or(0.0);
        match buckets.iter_mut().find(|(at, _)| *at == le) {
            Some((_, total)) => *total += count,
            None => buckets.push((le, count)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

/// The `q` quantile of what was observed between two scrapes' buckets: the upper bound of
/// the bucket it falls in.
fn quantile(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> Option<f64> {
    let grown: Vec<(f64, f64)> = after
        .iter()
        .map(|(le, count)| {
            let was = before.iter().find(|(at, _)| at == le).map_or(0.0, |(_, c)| *c);
            (*le, count - was)
        })
        .collect();
    let total = grown.last()?.1;
    if total <= 0.0 {
        return None;
    }
    grown.iter().find(|(_, count)| *count >= q * total).map(|(le, _)| *le)
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// What one contender did.
struct Run {
    which: &'static str,
    fresh: Option<Duration>,
    all_ready: Duration,
    /// For each restart over settled CRs, when a CR made just after it was Ready (sorted).
    restarted: Vec<Duration>,
    changes: usize,
    latencies: Vec<Duration>,
    queue: (Option<f64>, Option<f64>),
    /// Its own event-to-done histogram's p50 and p99 (ork only).
    own: (Option<f64>, Option<f64>),
    rss_mb: f64,
}

async fn compare() {
    let plan = Plan::from_env();
    let dir = common::scratch("ork-latency-");
    let mut options = Options::new(dir.path());
    options.nodes = 0;
    eprintln!("starting a control plane");
    let plane = ControlPlane::start(options).await.expect("the control plane");
    let kubeconfig = plane.kubeconfig();
    let setup = client(&kubeconfig, "setup").await;
    let watching = client(&kubeconfig, "watch").await;
    for i in 0..plan.namespaces {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": plan.namespace(i)}})).expect("a namespace");
        Api::<Namespace>::all(setup.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create a namespace");
    }
    let only = std::env::var("ORK_LATENCY_CONTENDERS").unwrap_or_default();
    let wanted = |which: &str| only.is_empty() || only.split(',').any(|w| w.trim() == which);
    let mut contenders = Vec::new();
    if wanted("ork") {
        contenders.push(("ork", Start::Phase));
    }
    if wanted("controller-runtime")
        && let Some(program) = build_controller_runtime()
    {
        contenders.push(("controller-runtime", Start::Program(program, Vec::new())));
    }
    let mut runs = Vec::new();
    for (which, start) in &contenders {
        runs.push(contend(&plan, which, start, &kubeconfig, &setup, &watching).await);
    }
    print(&plan, &runs);
}

async fn contend(
    plan: &Plan,
    which: &'static str,
    start: &Start,
    kubeconfig: &Path,
    setup: &kube::Client,
    watching: &kube::Client,
) -> Run {
    let group = group(which);
    let kinds = plan.kinds();
    let katalog =
        orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text(&group, &kinds))]).expect("the Katalog");
    let crds = orkestra_kube::crd_install::install_crds(setup, &katalog.katalog, Duration::from_secs(120))
        .await
        .expect("the CRDs");
    eprintln!("{which}: seeding {} objects", plan.objects);
    seed(setup, plan, &group, &kinds).await;
    let pending: Pending = Arc::default();
    let seen = Arc::new(Mutex::new(Seen::default()));
    watch(watching, &group, &kinds, pending.clone(), seen.clone());
    let metrics = free_addr();
    let env = [
        ("BENCH_GROUP", group.clone()),
        ("BENCH_KINDS", kinds.join(",")),
        ("BENCH_METRICS_ADDR", metrics.clone()),
    ];
    eprintln!("{which}: converging (its /metrics on http://{metrics}/metrics)");
    let started = Instant::now();
    let arg = match start {
        Start::Phase => group.as_str(),
        Start::Program(..) => "-",
    };
    let mut child = spawn(start, which, arg, kubeconfig, &env);
    // A CR made just after the start, with the initial list's work ahead of it.
    let first_kind =
        Api::<DynamicObject>::namespaced_with(setup.clone(), &plan.namespace(0), &resource(&group, &kinds[0]));
    let make = |name: String| {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1"), "kind": kinds[0],
            "metadata": {"name": name}, "spec": {"value": "v0"},
        }))
        .expect("a fresh CR");
        let api = first_kind.clone();
        async move {
            api.create(&PostParams::default(), &object)
                .await
                .expect("create a fresh CR")
        }
    };
    make("fresh".into()).await;
    let everyone = plan.objects + 1;
    let converged = async {
        loop {
            let ready = seen.lock().ready.values().filter(|r| **r).count();
            if ready >= everyone {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(PATIENCE, converged)
        .await
        .expect("every CR Ready in time");
    let all_ready = started.elapsed();
    // Its own histogram, before the changes: what the stream adds is compared.
    let (histogram, selector) = match start {
        Start::Phase => ("orkestra_queue_latency_seconds", "class=\"user\""),
        Start::Program(..) => ("workqueue_queue_duration_seconds", "name="),
    };
    let metrics_url = format!("http://{metrics}/metrics");
    let scraped = reqwest_get(&metrics_url).await;
    let before = buckets(&scraped, histogram, selector);
    // ork's own time from a change's event to its status written, apart from the watch's.
    let done_before = buckets(&scraped, "orkestra_reconcile_latency_seconds", selector);
    eprintln!("{which}: {} changes a second for {} s", plan.rate, plan.seconds);
    let changes = stream(plan, &group, &kinds, setup, &pending).await;
    let drained = async {
        while !pending.lock().is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let _ = tokio::time::timeout(DRAIN, drained).await;
    let scraped = reqwest_get(&metrics_url).await;
    let after = buckets(&scraped, histogram, selector);
    let queue = (quantile(&before, &after, 0.5), quantile(&before, &after, 0.99));
    let done_after = buckets(&scraped, "orkestra_reconcile_latency_seconds", selector);
    let own = (
        quantile(&done_before, &done_after, 0.5),
        quantile(&done_before, &done_after, 0.99),
    );
    drop(child.stdin.take());
    let output = child.wait_with_output().expect("the contender's output");
    let rss_kib: f64 = reported(&output.stdout, "peak_rss_kib")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);

    // Started again over settled CRs, as after an upgrade: a new CR must not wait for the
    // initial list's work, which is all resync now. Several times: one start on a shared
    // 2-core machine says little.
    let mut restarted = Vec::new();
    for round in 0..plan.restarts {
        eprintln!("{which}: restarted ({}/{})", round + 1, plan.restarts);
        let name = format!("fresh-again-{round}");
        let again = Instant::now();
        let mut child = spawn(start, which, arg, kubeconfig, &env);
        make(name.clone()).await;
        let fresh_again = async {
            loop {
                if let Some(at) = seen.lock().fresh.get(&name) {
                    return at.duration_since(again);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        restarted.extend(tokio::time::timeout(PATIENCE, fresh_again).await.ok());
        drop(child.stdin.take());
        let _ = child.wait_with_output();
    }
    restarted.sort();

    let (fresh, mut latencies) = {
        let seen = seen.lock();
        (
            seen.fresh.get("fresh").map(|at| at.duration_since(started)),
            seen.latencies.clone(),
        )
    };
    latencies.sort();
    eprintln!("{which}: removing its CRDs and collecting their ConfigMaps");
    remove(setup, &crds, plan).await;
    Run {
        which,
        fresh,
        all_ready,
        restarted,
        changes,
        latencies,
        queue,
        own,
        rss_mb: rss_kib / 1024.0,
    }
}

/// Writes `rate` spec changes a second for the plan's seconds, spread over the objects; each
/// is pending until a watch sees it through. How many were written.
async fn stream(plan: &Plan, group: &str, kinds: &[String], setup: &kube::Client, pending: &Pending) -> usize {
    let total = plan.rate as u64 * plan.seconds;
    let began = tokio::time::Instant::now();
    let mut writes = Vec::new();
    for n in 0..total {
        tokio::time::sleep_until(began + Duration::from_secs_f64(n as f64 / plan.rate as f64)).await;
        // A stride that visits every object before any twice.
        let i = (n as usize * 7919) % plan.objects.max(1);
        let (k, namespace, name) = plan.object(i);
        let crs = Api::<DynamicObject>::namespaced_with(setup.clone(), &namespace, &resource(group, &kinds[k]));
        let pending = pending.clone();
        writes.push(tokio::spawn(async move {
            let written = Instant::now();
            let patch = json!({"spec": {"value": format!("v{}", n + 1)}});
            let Ok(cr) = crs.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await else {
                return;
            };
            let generation = cr.metadata.generation.unwrap_or_default();
            pending
                .lock()
                .insert(format!("{k}:{namespace}/{name}"), (generation, written));
        }));
    }
    for write in writes {
        let _ = write.await;
    }
    total as usize
}

async fn reqwest_get(url: &str) -> String {
    match reqwest::get(url).await {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(error) => {
            eprintln!("scraping {url}: {error}");
            String::new()
        }
    }
}

/// Deletes a contender's CRDs (and so its CRs) and its ConfigMaps, so the next contender
/// has the API server to itself. The ConfigMaps go by a collection delete per namespace: the
/// garbage collector does not collect children whose owner's kind is gone.
async fn remove(setup: &kube::Client, crds: &[String], plan: &Plan) {
    let definitions: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(setup.clone());
    for crd in crds {
        let _ = definitions.delete(crd, &DeleteParams::default()).await;
    }
    for i in 0..plan.namespaces {
        let configmaps: Api<ConfigMap> = Api::namespaced(setup.clone(), &plan.namespace(i));
        let children = ListParams::default().fields("metadata.name!=kube-root-ca.crt");
        if let Err(error) = configmaps.delete_collection(&DeleteParams::default(), &children).await {
            eprintln!("deleting the ConfigMaps of {}: {error}", plan.namespace(i));
        }
    }
}

/// The median restart, then each (`-` if none was Ready in time).
fn restarts(each: &[Duration]) -> String {
    let secs = |d: &Duration| format!("{:.2} s", d.as_secs_f64());
    match each.get(each.len() / 2) {
        Some(median) => format!(
            "{} ({})",
            secs(median),
            each.iter().map(secs).collect::<Vec<_>>().join(", ")
        ),
        None => "-".into(),
    }
}

fn print(plan: &Plan, runs: &[Run]) {
    println!(
        "Latency: {} CRs over {} CRDs and {} namespaces, one ConfigMap and a Ready status each, {WORKERS} \
         reconciles at once per CRD; then {} spec changes a second for {} s.",
        plan.objects, plan.crds, plan.namespaces, plan.rate, plan.seconds
    );
    println!(
        "| contender | new CR Ready, first start | all Ready | new CR Ready, restart (median: each) | changes (seen through) | reconcile p50 | p99 | max | queue p50 (own histogram) | p99 | event to done p50 (own histogram) | p99 | peak RSS MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
    let bound = |b: Option<f64>| b.map_or("-".to_string(), |s| format!("≤ {:.1} ms", s * 1e3));
    for run in runs {
        let secs = |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.2} s", d.as_secs_f64()));
        println!(
            "| {} | {} | {:.1} s | {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
            run.which,
            secs(run.fresh),
            run.all_ready.as_secs_f64(),
            restarts(&run.restarted),
            run.changes,
            run.latencies.len(),
            ms(percentile(&run.latencies, 0.5)),
            ms(percentile(&run.latencies, 0.99)),
            ms(run.latencies.last().copied().unwrap_or_default()),
            bound(run.queue.0),
            bound(run.queue.1),
            bound(run.own.0),
            bound(run.own.1),
            run.rss_mb,
        );
    }
}
