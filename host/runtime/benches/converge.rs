//! Converging many CRs, side by side, on one control plane of its own (etcd,
//! kube-apiserver with an audit log, kube-controller-manager): N pre-existing CRs of a
//! Katalog that renders one ConfigMap each and a Ready status, reconciled by
//! - `ork`: this runtime as it ships, `ork run` on the Katalog (10 workers, its Live API on
//!   a free port), built with `cargo build --release` (and so linked as `host/cli/build.rs`
//!   says: its executed functions side by side);
//! - `kube-runtime`: a plain kube-runtime `Controller` (concurrency 10, server-side apply of
//!   the ConfigMap, a status patch), a program of its own
//!   (`benches/contenders/kube-runtime`, built as `ork` is);
//! - `controller-runtime`: a plain controller-runtime v0.25 controller in Go
//!   (`benches/contenders/controller-runtime`, built with `go build`; skipped, and said so,
//!   when Go or its modules are missing), `Owns(&ConfigMap{})`, 10 concurrent reconciles.
//!
//! Each contender gets its own namespace and runs alone. Its clock starts before its process
//! is spawned and stops when a watch sees every CR Ready. Its requests are its own: every
//! contender sends its own User-Agent, and the API server's audit log is counted by it, by
//! verb and resource, up to all-Ready and over the following 60 s (resyncs included).
//! Printed per N and contender: time to the first and to the last Ready, peak RSS and the
//! resident memory at the end split into the process's own (heap, stacks) and its code's
//! pages, requests (total, per CR, by verb), and each figure's ratio to the best contender's.
//!
//! ork runs with the allocator its binary ships with, the others with a plain program's
//! (`common::allocator`). Peak RSS is each process's `VmHWM`, read just before it is stopped.
//!
//! Needs the local control plane (`ork control-plane install`).
//! Run: `ORK_BENCH_CRS=1000,3000,10000 cargo bench -p orkestra --bench converge`
//! (default 1000). `ORK_BENCH_CONTENDERS=ork,kube-runtime` runs only those;
//! `ORK_BENCH_ORK_ALLOCATORS=system,mimalloc,jemalloc` runs the runtime once with each, from
//! this benchmark's binary (to choose one by measurement); `ORK_BENCH_STEADY=5` watches 5 s
//! after convergence instead of 60.

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks name the objects they create; no tenant input reaches these calls"
)]

mod common;

#[global_allocator]
static ALLOCATOR: common::allocator::Chosen = common::allocator::Chosen;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use orkestra_control_plane::{ControlPlane, Options};
use serde_json::{Value, json};

use common::{
    Start, WORK, WORKERS, agent, build_controller_runtime, build_release, client, is_ready, resident_kib, spawn,
    until_stdin_closes,
};

/// How long a converged contender is watched for requests it still sends
/// (`ORK_BENCH_STEADY` seconds, default 60).
fn steady() -> Duration {
    let seconds = std::env::var("ORK_BENCH_STEADY").ok().and_then(|s| s.parse().ok());
    Duration::from_secs(seconds.unwrap_or(60))
}
const GROUP: &str = "converge.orkestra.io";
/// How long a contender may take to converge before the run gives up on it.
const PATIENCE: Duration = Duration::from_secs(900);

fn katalog_text(namespace: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: converge}}
spec:
  crds:
    item:
      apiTypes: {{group: {GROUP}, version: v1, kind: Item, plural: items}}
      namespace: {namespace}
{WORK}"
    )
}

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Item"), "items")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = common::tokio();
    match args.iter().position(|a| a == "--phase") {
        Some(at) => runtime.block_on(phase(&args[at + 1], &args[at + 2])),
        None => runtime.block_on(compare()),
    }
}

/// The runtime with one of the allocators to compare, in a child process: runs until stdin
/// closes.
async fn phase(which: &str, namespace: &str) {
    let kubeconfig = PathBuf::from(std::env::var("KUBECONFIG").expect("KUBECONFIG"));
    let client = client(&kubeconfig, which).await;
    let katalog =
        orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text(namespace))]).expect("the Katalog");
    let host = orkestra::Runtime::new(client, &katalog).expect("compile");
    let running = tokio::spawn(host.run(std::future::pending()));
    until_stdin_closes().await;
    running.abort();
}

/// One contender: how it is started, its allocator, and the User-Agent its requests carry.
struct Contender {
    which: &'static str,
    start: Start,
    allocator: &'static str,
    agent: String,
}

impl Contender {
    /// A contender whose client says `bench-<which>`.
    fn new(which: &'static str, start: Start, allocator: &'static str) -> Self {
        Self {
            which,
            start,
            allocator,
            agent: agent(which),
        }
    }
}

/// What one contender did at one N.
struct Run {
    which: &'static str,
    first_ready: Duration,
    all_ready: Duration,
    rss_mb: f64,
    /// Resident at the end of the quiet period: its own memory and its code's pages, MB.
    resident_mb: (f64, f64),
    converge: BTreeMap<String, u64>,
    steady: BTreeMap<String, u64>,
}

/// Creates `n` Items in a fresh namespace.
async fn seed(setup: &kube::Client, namespace: &str, n: usize) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}})).expect("a namespace");
    Api::<Namespace>::all(setup.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create the namespace");
    let crs = Api::<DynamicObject>::namespaced_with(setup.clone(), namespace, &resource());
    futures::stream::iter(0..n)
        .for_each_concurrent(20, |i| {
            let crs = crs.clone();
            async move {
                let object: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": format!("{GROUP}/v1"), "kind": "Item",
                    "metadata": {"name": format!("item-{i}")}, "spec": {"value": format!("v{i}")},
                }))
                .expect("an Item");
                crs.create(&PostParams::default(), &object)
                    .await
                    .expect("create an Item");
            }
        })
        .await;
}

/// Waits until a watch of the namespace's Items sees all `n` Ready: the time of the first
/// and of the last, from `started`.
async fn readiness(watching: &kube::Client, namespace: &str, n: usize, started: Instant) -> (Duration, Duration) {
    let crs = Api::<DynamicObject>::namespaced_with(watching.clone(), namespace, &resource());
    let mut events = std::pin::pin!(watcher(crs, watcher::Config::default()));
    let mut ready = HashMap::new();
    let mut first = None;
    let wait = async {
        while let Some(event) = events.try_next().await.expect("the watch of Items") {
            let objects = match event {
                watcher::Event::Apply(cr) | watcher::Event::InitApply(cr) => vec![cr],
                _ => Vec::new(),
            };
            for cr in objects {
                let name = cr.metadata.name.clone().unwrap_or_default();
                ready.insert(name, is_ready(&cr.data));
            }
            let count = ready.values().filter(|r| **r).count();
            if count > 0 && first.is_none() {
                first = Some(started.elapsed());
            }
            if count == n {
                return;
            }
        }
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .expect("every CR Ready in time");
    (first.unwrap_or_default(), started.elapsed())
}

/// The requests made with User-Agent `agent`, from the audit log: when each was received,
/// and its "verb resource". The log holds one event per request, written when its response is
/// complete (a watch when it ends), so it is read after the contender has exited.
fn requests(log: &Path, agent: &str) -> Vec<(jiff::Timestamp, String)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["userAgent"].as_str() == Some(agent))
        .filter_map(|event| {
            let at = event["requestReceivedTimestamp"].as_str()?.parse().ok()?;
            let object = &event["objectRef"];
            let mut resource = object["resource"].as_str().unwrap_or("-").to_string();
            if let Some(sub) = object["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            let verb = event["verb"].as_str().unwrap_or_default().to_uppercase();
            Some((at, format!("{verb} {resource}")))
        })
        .collect()
}

/// Of `requests`, those received in `[from, to)`, counted by "verb resource".
fn within(requests: &[(jiff::Timestamp, String)], from: jiff::Timestamp, to: jiff::Timestamp) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for (_, request) in requests.iter().filter(|(at, _)| *at >= from && *at < to) {
        *counts.entry(request.clone()).or_insert(0) += 1;
    }
    counts
}

fn total(counts: &BTreeMap<String, u64>) -> u64 {
    counts.values().sum()
}

fn show(counts: &BTreeMap<String, u64>) -> String {
    let parts: Vec<String> = counts.iter().map(|(key, n)| format!("{key} {n}")).collect();
    format!("{} ({})", total(counts), parts.join(", "))
}

async fn compare() {
    let sizes: Vec<usize> = std::env::var("ORK_BENCH_CRS")
        .unwrap_or_else(|_| "1000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("ORK_BENCH_CRS: numbers, comma separated"))
        .collect();
    let dir = common::scratch("ork-converge-");
    let mut options = Options::new(dir.path());
    options.audit = true;
    options.nodes = 0;
    eprintln!("starting a control plane with an audit log");
    let plane = ControlPlane::start(options).await.expect("the control plane");
    let kubeconfig = plane.kubeconfig();
    let log = orkestra_control_plane::audit_log(plane.dir());
    let setup = client(&kubeconfig, "setup").await;
    let watching = client(&kubeconfig, "watch").await;
    let katalog =
        orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text("converge"))]).expect("the Katalog");
    orkestra_kube::crd_install::install_crds(&setup, &katalog.katalog, Duration::from_secs(60))
        .await
        .expect("the CRD");
    let picked = |which: &str| {
        std::env::var("ORK_BENCH_CONTENDERS").map_or(true, |list| list.split(',').any(|w| which.starts_with(w.trim())))
    };
    // ork as it ships, or the runtime with each of ORK_BENCH_ORK_ALLOCATORS (to choose one by
    // measurement); the others with a plain program's allocator.
    let mut contenders: Vec<Contender> = Vec::new();
    match std::env::var("ORK_BENCH_ORK_ALLOCATORS") {
        Ok(list) => {
            for allocator in list.split(',') {
                let allocator: &'static str = Box::leak(allocator.trim().to_string().into_boxed_str());
                let which: &'static str = Box::leak(format!("ork-{allocator}").into_boxed_str());
                contenders.push(Contender::new(which, Start::Phase, allocator));
            }
        }
        Err(_) => {
            if picked("ork")
                && let Some(program) = build_release("orkestra-cli", "ork")
            {
                let run = ["run", "--http-addr", "127.0.0.1:0", "-f"].map(String::from).to_vec();
                let mut ork = Contender::new("ork", Start::Program(program, run), common::allocator::SHIPPED);
                ork.agent = orkestra_kube::user_agent("run");
                contenders.push(ork);
            }
        }
    }
    if picked("kube-runtime")
        && let Some(program) = build_release("kube-runtime-contender", "kube-runtime-contender")
    {
        contenders.push(Contender::new(
            "kube-runtime",
            Start::Program(program, Vec::new()),
            "system",
        ));
    }
    if picked("controller-runtime")
        && let Some(program) = build_controller_runtime()
    {
        contenders.push(Contender::new(
            "controller-runtime",
            Start::Program(program, Vec::new()),
            "system",
        ));
    }
    contenders.retain(|contender| picked(contender.which));
    let mut table = Vec::new();
    for &n in &sizes {
        for Contender {
            which,
            start,
            allocator,
            agent,
        } in &contenders
        {
            let namespace = format!("converge-{which}-{n}");
            eprintln!("{n} CRs: {which}");
            seed(&setup, &namespace, n).await;
            // `ork run` is given its Katalog's file; the others, the namespace.
            let arg = match start {
                Start::Program(_, leading) if !leading.is_empty() => {
                    let file = dir.path().join(format!("{namespace}.yaml"));
                    std::fs::write(&file, katalog_text(&namespace)).expect("the Katalog's file");
                    file.display().to_string()
                }
                _ => namespace.clone(),
            };
            let from = jiff::Timestamp::now();
            let started = Instant::now();
            let env = [(common::allocator::VARIABLE, allocator.to_string())];
            let mut child = spawn(start, which, &arg, &kubeconfig, &env);
            let (first_ready, all_ready) = readiness(&watching, &namespace, n, started).await;
            let ready_at = jiff::Timestamp::now();
            tokio::time::sleep(steady()).await;
            let steady_end = jiff::Timestamp::now();
            let (anon, file) = resident_kib(child.id());
            let rss_kib = orkestra_test_support::bench::proc_status(&child.id().to_string(), "VmHWM:");
            // Stopped: the programs that wait for their stdin to close by that, `ork` (which
            // does not) by a kill; whatever they would still do is not measured.
            drop(child.stdin.take());
            let _ = child.kill();
            child.wait().expect("the contender's exit");
            // The audit log is written in batches of at most a second.
            tokio::time::sleep(Duration::from_secs(3)).await;
            let sent = requests(&log, agent);
            table.push((
                n,
                Run {
                    which,
                    first_ready,
                    all_ready,
                    rss_mb: rss_kib / 1024.0,
                    resident_mb: (anon / 1024.0, file / 1024.0),
                    converge: within(&sent, from, ready_at),
                    steady: within(&sent, ready_at, steady_end),
                },
            ));
        }
    }
    print(&table);
}

/// Memory per cached CR (each with its ConfigMap): each contender's growth of peak RSS from
/// the smallest N to the largest, per CR between them. Needs two N.
fn per_cached_cr(table: &[(usize, Run)]) {
    let (Some(low), Some(high)) = (table.iter().map(|(n, _)| *n).min(), table.iter().map(|(n, _)| *n).max()) else {
        return;
    };
    if low == high {
        return;
    }
    let rss = |n: usize, which: &str| {
        table
            .iter()
            .find(|(at, run)| *at == n && run.which == which)
            .map(|(_, run)| run.rss_mb)
    };
    let slopes: Vec<(&str, f64)> = table
        .iter()
        .filter(|(n, _)| *n == low)
        .filter_map(|(_, run)| {
            let grown = rss(high, run.which)? - run.rss_mb;
            Some((run.which, grown * 1024.0 / (high - low) as f64))
        })
        .collect();
    let least = slopes.iter().map(|(_, kb)| *kb).fold(f64::INFINITY, f64::min);
    println!();
    println!("Memory per cached CR (peak RSS growth from {low} to {high} CRs):");
    for (which, kb) in slopes {
        println!("  {which}: {kb:.1} KB ({:.2}x)", kb / least);
    }
}

fn print(table: &[(usize, Run)]) {
    println!("Converge: one ConfigMap and a Ready status per CR, {WORKERS} concurrent reconciles each,");
    println!("kube-apiserver with kube-controller-manager on this machine; requests from the audit log.");
    println!(
        "| N | contender | first Ready | all Ready (x best) | peak RSS MB (x best) | at the end: own / code MB | requests (x best) | per CR | in the next {} s |",
        steady().as_secs()
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (n, runs) in table.chunk_by(|a, b| a.0 == b.0).map(|c| (c[0].0, c)) {
        let best = |f: &dyn Fn(&Run) -> f64| runs.iter().map(|(_, r)| f(r)).fold(f64::INFINITY, f64::min);
        let (time, rss, sent) = (
            best(&|r| r.all_ready.as_secs_f64()),
            best(&|r| r.rss_mb),
            best(&|r| total(&r.converge) as f64),
        );
        for (_, run) in runs {
            let requests = total(&run.converge) as f64;
            println!(
                "| {n} | {} | {:.2} s | {:.2} s ({:.2}x) | {:.1} ({:.2}x) | {:.1} / {:.1} | {requests} ({:.2}x) | {:.2} | {} |",
                run.which,
                run.first_ready.as_secs_f64(),
                run.all_ready.as_secs_f64(),
                run.all_ready.as_secs_f64() / time,
                run.rss_mb,
                run.rss_mb / rss,
                run.resident_mb.0,
                run.resident_mb.1,
                requests / sent.max(1.0),
                requests / n as f64,
                total(&run.steady),
            );
        }
    }
    per_cached_cr(table);
    println!();
    println!("Requests by verb and resource, up to all Ready:");
    for (n, run) in table {
        println!("  {n} {}: {}", run.which, show(&run.converge));
        if total(&run.steady) > 0 {
            println!(
                "  {n} {} in the next {} s: {}",
                run.which,
                steady().as_secs(),
                show(&run.steady)
            );
        }
    }
}
