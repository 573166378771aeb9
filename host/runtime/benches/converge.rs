//! Converging many CRs, against the local control plane: 1000 pre-existing CRs of a Katalog
//! that renders one ConfigMap each and a Ready status, reconciled by `ork`'s runtime (10
//! workers), and the same work done by a plain kube-runtime `Controller` (concurrency 10,
//! server-side apply of the ConfigMap, a status patch). Each runs in its own process, on its
//! own namespace of the same API server, one after the other. Printed per contender: the wall
//! time to all-Ready, the API requests it made by verb and resource (the API server's own
//! `apiserver_request_total`, the poller's lists taken out), the requests in the following
//! 60 s of steady state (resyncs included), and the process's peak RSS.
//! Needs the local control plane (`ork control-plane install`).
//! Run: `cargo bench -p orkestra --bench converge`.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks name the objects they create; no tenant input reaches these calls"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::watcher;
use serde_json::json;

const CRS: usize = 1000;
const WORKERS: usize = 10;
const STEADY: Duration = Duration::from_secs(60);
/// A window with nobody reconciling, to measure what the API server serves anyway.
const IDLE: Duration = Duration::from_secs(15);
const GROUP: &str = "converge.orkestra.io";

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
      operatorBox:
        reconcile:
          workers: {WORKERS}
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}', data: {{value: '{{{{ .spec.value }}}}'}}}}
"
    )
}

fn items(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Item"), "items");
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// The system allocator, counting the bytes live at once: the heap's own peak, next to the
/// resident set (which adds code, stacks and what the allocator keeps).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counters move.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let block = unsafe { System.alloc(layout) };
        if !block.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(block, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak resident set of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    match args.iter().position(|a| a == "--phase") {
        Some(at) => runtime.block_on(phase(&args[at + 1], &args[at + 2])),
        None => runtime.block_on(compare()),
    }
}

/// One contender, in a child process: runs until stdin closes, then prints its peak RSS.
async fn phase(which: &str, namespace: &str) {
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG");
    let client = orkestra_control_plane::client_for(std::path::Path::new(&kubeconfig))
        .await
        .expect("a client");
    let running = match which {
        "ork" => {
            let katalog = orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text(namespace))])
                .expect("the Katalog");
            let host = orkestra::runtime::Runtime::new(client, &katalog).expect("compile");
            tokio::spawn(host.run(std::future::pending()))
        }
        _ => tokio::spawn(plain(client, namespace.to_string())),
    };
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {
            line.clear();
        }
    })
    .await
    .expect("stdin");
    running.abort();
    println!("peak_rss_kib={}", peak_rss_kib());
    println!("peak_heap_kib={}", PEAK.load(Ordering::Relaxed) / 1024);
}

/// The plain kube-runtime controller doing the same work.
async fn plain(client: kube::Client, namespace: String) {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Item"), "items");
    let crs = items(&client, &namespace);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let context = Arc::new((client, resource.clone()));
    Controller::new_with(crs, watcher::Config::default(), resource)
        .owns(configmaps, watcher::Config::default())
        .with_config(Config::default().concurrency(WORKERS as u16))
        .run(reconcile, |_, _, _| Action::requeue(Duration::from_secs(5)), context)
        .for_each(|_| async {})
        .await;
}

async fn reconcile(cr: Arc<DynamicObject>, context: Arc<(kube::Client, ApiResource)>) -> Result<Action, kube::Error> {
    let (client, resource) = &*context;
    let namespace = cr.metadata.namespace.clone().unwrap_or_default();
    let name = cr.metadata.name.clone().unwrap_or_default();
    let configmap = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": format!("{GROUP}/v1"), "kind": "Item", "name": name,
            "uid": cr.metadata.uid, "controller": true, "blockOwnerDeletion": true,
        }]},
        "data": {"value": cr.data["spec"]["value"]},
    });
    Api::<ConfigMap>::namespaced(client.clone(), &namespace)
        .patch(&name, &PatchParams::apply("plain").force(), &Patch::Apply(&configmap))
        .await?;
    let generation = cr.metadata.generation;
    let ready = &cr.data["status"]["conditions"][0];
    if ready["status"] != "True" || cr.data["status"]["observedGeneration"] != json!(generation) {
        let status = json!({"status": {"observedGeneration": generation, "conditions": [{
            "type": "Ready", "status": "True", "reason": "ReconcileSucceeded", "message": "",
            "lastTransitionTime": jiff::Timestamp::now().to_string(), "observedGeneration": generation,
        }]}});
        Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, resource)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
    }
    Ok(Action::await_change())
}

/// `apiserver_request_total` summed by (verb, resource) for the resources of this work.
async fn requests(client: &kube::Client) -> BTreeMap<(String, String), f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).expect("a request");
    let text = client.request_text(request).await.expect("the API server's metrics");
    let mut totals = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_default()
                .to_string()
        };
        let resource = label("resource");
        if !["items", "configmaps", "events"].contains(&resource.as_str()) {
            continue;
        }
        let subresource = label("subresource");
        let resource = if subresource.is_empty() {
            resource
        } else {
            format!("{resource}/{subresource}")
        };
        *totals.entry((label("verb"), resource)).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    totals
}

/// The requests made between two snapshots, the poller's lists and the background (`idle`
/// over `IDLE`, scaled to `window`) taken out.
fn difference(
    after: &BTreeMap<(String, String), f64>,
    before: &BTreeMap<(String, String), f64>,
    polls: f64,
    idle: &BTreeMap<(String, String), f64>,
    window: Duration,
) -> BTreeMap<(String, String), f64> {
    let scale = window.as_secs_f64() / IDLE.as_secs_f64();
    let mut made = BTreeMap::new();
    for (key, value) in after {
        let mut delta = value - before.get(key).copied().unwrap_or(0.0);
        if key.0 == "LIST" && key.1 == "items" {
            delta -= polls;
        }
        delta -= idle.get(key).copied().unwrap_or(0.0) * scale;
        if delta >= 0.5 {
            made.insert(key.clone(), delta.round());
        }
    }
    made
}

fn show(made: &BTreeMap<(String, String), f64>) -> String {
    // A fold from 0.0: an empty float sum is -0.0, which would print as "-0".
    let total: f64 = made.values().fold(0.0, |sum, n| sum + n);
    let parts: Vec<String> = made
        .iter()
        .map(|((verb, resource), n)| format!("{verb} {resource} {n}"))
        .collect();
    format!("{total} ({})", parts.join(", "))
}

async fn compare() {
    let cluster = orkestra_test_support::cluster().expect("the local control plane");
    // The CRD first, then time for the controller-manager to take it in (its garbage
    // collector picks up a new kind within its 30 s discovery period, listing it meanwhile):
    // that settling belongs to neither contender.
    let setup = orkestra_test_support::namespace("converge-crd")
        .await
        .expect("a namespace");
    let katalog =
        orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text(&setup.name))]).expect("the Katalog");
    orkestra_kube::crd_install::install_crds(&setup.client, &katalog.katalog, Duration::from_secs(60))
        .await
        .expect("the CRD");
    tokio::time::sleep(Duration::from_secs(45)).await;
    let mut results = Vec::new();
    for which in ["ork", "plain"] {
        let ns = orkestra_test_support::namespace(&format!("converge-{which}"))
            .await
            .expect("a namespace");
        let crs = items(&ns.client, &ns.name);
        futures::stream::iter(0..CRS)
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
        // What the API server sees with nobody reconciling (the controller-manager's own
        // lists), taken out of both windows below at its rate.
        let idle_from = requests(&ns.client).await;
        tokio::time::sleep(IDLE).await;
        let before = requests(&ns.client).await;
        let idle = difference(&before, &idle_from, 0.0, &BTreeMap::new(), Duration::ZERO);
        let started = Instant::now();
        let mut child = Command::new(std::env::current_exe().expect("this benchmark"))
            .args(["--phase", which, &ns.name])
            .env("KUBECONFIG", &cluster.kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the contender's process");
        let mut polls = 0.0;
        loop {
            polls += 1.0;
            let list = crs.list(&ListParams::default()).await.expect("list the Items");
            let ready = list
                .items
                .iter()
                .filter(|cr| cr.data["status"]["conditions"][0]["status"] == "True")
                .count();
            if ready == CRS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let converged = started.elapsed();
        let at_ready = requests(&ns.client).await;
        tokio::time::sleep(STEADY).await;
        let steady = requests(&ns.client).await;
        drop(child.stdin.take());
        let output = child.wait_with_output().expect("the contender's output");
        let reported = |field: &str| {
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .find_map(|l| l.strip_prefix(field).map(String::from))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
                / 1024.0
        };
        results.push((
            which,
            converged,
            difference(&at_ready, &before, polls, &idle, converged),
            difference(&steady, &at_ready, 0.0, &idle, STEADY),
            reported("peak_rss_kib="),
            reported("peak_heap_kib="),
        ));
    }
    println!("{CRS} CRs, one ConfigMap each, {WORKERS} workers, against kube-apiserver (2 cores):");
    for (which, converged, made, steady, rss, heap) in &results {
        println!("  {which}:");
        println!(
            "    all Ready after {:.2} s; peak RSS {rss:.1} MB (heap at its peak {heap:.1} MB)",
            converged.as_secs_f64()
        );
        println!("    requests to converge: {}", show(made));
        println!("    requests in the next {} s: {}", STEADY.as_secs(), show(steady));
    }
}
