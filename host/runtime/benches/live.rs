//! What the Live API costs, against the local control plane: a Katalog of 10 CRDs with
//! 1,000 CRs each (10,000 cached), converged once, then run by two runtime processes one
//! after the other: one without the Live API (what `--no-http` runs), one with it (the HTTP
//! server, the per-CRD Event watches of the CR event log, the metrics collector). Printed:
//! each process's resident set once settled, the one with the Live API again after the
//! load, and the latency of `GET /metrics` and of `GET /katalog/{crd}/cr` (1,000 items per
//! answer), p50/p99/max over sequential requests on one connection.
//! Needs the local control plane (`ork control-plane install`).
//! Run: `cargo bench -p orkestra --bench live`.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks name the objects they create; no tenant input reaches these calls"
)]

mod common;

#[global_allocator]
static ALLOCATOR: common::allocator::Chosen = common::allocator::Chosen;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const CRDS: usize = 10;
const PER_CRD: usize = 1000;
const REQUESTS: usize = 300;
const GROUP: &str = "live.orkestra.io";

fn katalog_text(namespace: &str) -> String {
    let mut text = String::from(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {name: live-bench}\nspec:\n  crds:\n",
    );
    for i in 0..CRDS {
        text.push_str(&format!(
            "    thing{i}:
      apiTypes: {{group: {GROUP}, version: v1, kind: Thing{i}, plural: thing{i}s}}
      namespace: {namespace}
      operatorBox:
        reconcile:
          workers: 4
"
        ));
    }
    text
}

fn things(client: &kube::Client, namespace: &str, i: usize) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, "v1", &format!("Thing{i}"));
    let resource = ApiResource::from_gvk_with_plural(&gvk, &format!("thing{i}s"));
    Api::namespaced_with(client.clone(), namespace, &resource)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = common::tokio();
    match args.iter().position(|a| a == "--phase") {
        Some(at) => runtime.block_on(phase(&args[at + 1], &args[at + 2], args.get(at + 3))),
        None => runtime.block_on(compare()),
    }
}

/// One runtime, in a child process, until stdin closes; `live` also serves the Live API on
/// the port given.
async fn phase(which: &str, namespace: &str, port: Option<&String>) {
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG");
    let client = orkestra_control_plane::client_for(std::path::Path::new(&kubeconfig))
        .await
        .expect("a client");
    let katalog =
        orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text(namespace))]).expect("the Katalog");
    let mut host = orkestra::runtime::Runtime::new(client, &katalog).expect("compile");
    if which == "live" {
        host = host.with_event_log();
    }
    if which.starts_with("live") {
        let port: u16 = port.expect("a port").parse().expect("a port number");
        let router = orkestra::live::router(host.inspect(), None, orkestra::live::Auth::open());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the Live API's port");
        tokio::spawn(orkestra::live::serve(listener, router, None));
    }
    let running = tokio::spawn(host.run(std::future::pending()));
    common::until_stdin_closes().await;
    running.abort();
}

/// A field of `/proc/PID/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time the process has used, in clock ticks (1/100 s).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces; the fields after it are plain.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| fields.get(n).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of stat; 12 and 13 after the name.
    field(11) + field(12)
}

/// Waits until the process has used under 2% of a core for 3 s: its caches are synced and
/// its start-up pass over every CR is done.
async fn settle(pid: u32) -> Duration {
    let started = Instant::now();
    loop {
        let before = cpu_ticks(pid);
        tokio::time::sleep(Duration::from_secs(3)).await;
        if cpu_ticks(pid) - before < 6 || started.elapsed() > Duration::from_secs(300) {
            return started.elapsed();
        }
    }
}

fn spawn(which: &str, namespace: &str, port: u16, kubeconfig: &std::path::Path) -> Child {
    Command::new(std::env::current_exe().expect("this benchmark"))
        .args(["--phase", which, namespace, &port.to_string()])
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::piped())
        .spawn()
        .expect("a runtime process")
}

fn stop(mut child: Child) {
    drop(child.stdin.take());
    let _ = child.wait();
}

/// p50, p99 and max of `GET url`, `REQUESTS` times one after the other; with the body
/// size of the last answer.
async fn latency(http: &reqwest::Client, urls: &[String]) -> (Duration, Duration, Duration, usize) {
    let mut took = Vec::with_capacity(REQUESTS);
    let mut size = 0;
    for i in 0..REQUESTS {
        let url = &urls[i % urls.len()];
        let started = Instant::now();
        let response = http.get(url).send().await.expect("the Live API");
        assert!(response.status().is_success(), "{url}: {}", response.status());
        size = response.bytes().await.expect("a body").len();
        took.push(started.elapsed());
    }
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    (at(0.50), at(0.99), took[took.len() - 1], size)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

async fn compare() {
    let cluster = orkestra_test_support::cluster().expect("the local control plane");
    let ns = orkestra_test_support::namespace("live-bench")
        .await
        .expect("a namespace");
    let katalog =
        orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text(&ns.name))]).expect("the Katalog");
    orkestra_kube::crd_install::install_crds(&ns.client, &katalog.katalog, Duration::from_secs(60))
        .await
        .expect("the CRDs");
    let started = Instant::now();
    futures::stream::iter((0..CRDS).flat_map(|c| (0..PER_CRD).map(move |i| (c, i))))
        .for_each_concurrent(32, |(c, i)| {
            let api = things(&ns.client, &ns.name, c);
            async move {
                let object: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": format!("{GROUP}/v1"), "kind": format!("Thing{c}"),
                    "metadata": {"name": format!("thing-{i}"), "labels": {"tier": "bench"}},
                    "spec": {"image": "nginx:1.27", "replicas": 2, "value": format!("value-{c}-{i}")},
                }))
                .expect("a Thing");
                api.create(&PostParams::default(), &object)
                    .await
                    .expect("create a Thing");
            }
        })
        .await;
    println!(
        "created {} CRs in {:.1} s",
        CRDS * PER_CRD,
        started.elapsed().as_secs_f64()
    );

    // Converged once, by a runtime not measured: both measured ones start from settled CRs
    // and so do the same start-up work (a pass over every CR, no writes).
    let started = Instant::now();
    let converging = spawn("plain", &ns.name, 0, &cluster.kubeconfig);
    loop {
        let mut ready = 0;
        for c in 0..CRDS {
            let list = things(&ns.client, &ns.name, c)
                .list(&ListParams::default())
                .await
                .expect("list the Things");
            ready += list
                .items
                .iter()
                .filter(|cr| cr.data["status"]["conditions"][0]["status"] == "True")
                .count();
        }
        if ready == CRDS * PER_CRD {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    stop(converging);
    println!("converged in {:.1} s", started.elapsed().as_secs_f64());

    let off = spawn("plain", &ns.name, 0, &cluster.kubeconfig);
    let off_settled = settle(off.id()).await;
    let off_rss = status_kib(off.id(), "VmRSS:");
    stop(off);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    // The Live API without the CR event log, to tell the two costs apart.
    let bare = spawn("live-without-events", &ns.name, port, &cluster.kubeconfig);
    settle(bare.id()).await;
    let bare_rss = status_kib(bare.id(), "VmRSS:");
    stop(bare);
    let on = spawn("live", &ns.name, port, &cluster.kubeconfig);
    let on_settled = settle(on.id()).await;
    let on_rss = status_kib(on.id(), "VmRSS:");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .expect("a client");
    let metrics = latency(&http, &[format!("{base}/metrics")]).await;
    let lists: Vec<String> = (0..CRDS).map(|c| format!("{base}/katalog/thing{c}/cr")).collect();
    let crs = latency(&http, &lists).await;
    let loaded_rss = status_kib(on.id(), "VmRSS:");
    let events: usize = futures::future::join_all(lists.iter().map(|url| {
        let http = http.clone();
        let url = url.replace("/cr", "");
        async move {
            let info: serde_json::Value = http
                .get(&url)
                .send()
                .await
                .expect("the Live API")
                .json()
                .await
                .expect("JSON");
            info["eventLog"]["events"].as_u64().unwrap_or(0) as usize
        }
    }))
    .await
    .into_iter()
    .sum();
    let on_peak = status_kib(on.id(), "VmHWM:");
    stop(on);

    let mb = |kib: u64| kib as f64 / 1024.0;
    let extra = |kib: u64| (kib as f64 - off_rss as f64) * 100.0 / off_rss as f64;
    println!(
        "{CRDS} CRDs x {PER_CRD} CRs = {} cached, against kube-apiserver (2 cores):",
        CRDS * PER_CRD
    );
    println!(
        "  RSS without the Live API: {:.1} MB (settled after {:.0} s)",
        mb(off_rss),
        off_settled.as_secs_f64()
    );
    println!(
        "  RSS with the Live API:    {:.1} MB settled ({:+.1}%), {:.1} MB after the requests below ({:+.1}%), peak {:.1} MB (settled after {:.0} s)",
        mb(on_rss),
        extra(on_rss),
        mb(loaded_rss),
        extra(loaded_rss),
        mb(on_peak),
        on_settled.as_secs_f64()
    );
    println!(
        "    of which the HTTP server and metrics: {:+.1} MB; the CR event log ({} events): {:+.1} MB",
        mb(bare_rss) - mb(off_rss),
        events,
        mb(on_rss) - mb(bare_rss)
    );
    for (name, (p50, p99, max, size)) in [("GET /metrics", metrics), ("GET /katalog/{crd}/cr", crs)] {
        println!(
            "  {name:<22} {REQUESTS} requests: p50 {}, p99 {}, max {} ({:.0} KB an answer)",
            ms(p50),
            ms(p99),
            ms(max),
            size as f64 / 1024.0
        );
    }
}
