//! What one tenant's flood at the doors and on the write path costs everyone else, measured
//! on an `ork run` process against the local control plane (issue 33's figures):
//! - calm: the probe latency of `/healthz` (a fresh connection each), the runtime's RSS and
//!   open files, and how long a quiet tenant's change takes to reach its ConfigMap;
//! - 10,000 idle connections held on the Live API: the same figures while they are held,
//!   and how many of them the runtime kept open;
//! - a write storm: two CRs whose status holds a timestamp to the nanosecond: the runtime's
//!   writes per second for them, and the quiet tenant's latency meanwhile.
//!
//! `ORK_BIN=/path/to/ork` measures another build (an older one, for before and after).
//! Needs the local control plane (`ork control-plane install`).
//! Run: `cargo bench -p orkestra-cli --bench doors`.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks name the objects they create; no tenant input reaches these calls"
)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_test_support::bench::{Host, percentile};
use serde_json::json;

const IDLE: usize = 10_000;
const PROBES: usize = 50;
/// The quiet tenant changes its CR this many times per phase, once a second.
const CHANGES: usize = 20;
const STORM: Duration = Duration::from_secs(20);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(bench());
}

fn katalog(ns: &str, group: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: doors}}
spec:
  crds:
    quiet:
      apiTypes: {{group: {group}, version: v1, kind: Quiet}}
      namespace: {ns}
      operatorBox:
        reconcile:
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-c', data: {{x: '{{{{ .spec.x }}}}'}}}}
    clock:
      apiTypes: {{group: {group}, version: v1, kind: Clock}}
      namespace: {ns}
      operatorBox:
        emit:
          status:
            fields:
              - {{path: at, value: '{{{{ timeFormat \"RFC3339Nano\" }}}}'}}
"
    )
}

/// `orkestra_writes` of a controller, from `/metrics`.
async fn writes(host: &Host, controller: &str) -> f64 {
    let text = reqwest::get(format!("http://{}/metrics", host.addr))
        .await
        .and_then(|r| r.error_for_status())
        .expect("/metrics")
        .text()
        .await
        .unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("orkestra_writes") && l.contains(&format!("controller=\"{controller}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn probes(addr: &str) -> (f64, f64, usize) {
    orkestra_test_support::bench::probes(addr, PROBES).await
}

/// The quiet tenant's changes, one a second: p50 and p99 in ms from the patch to its
/// ConfigMap.
async fn quiet_changes(quiets: &Api<DynamicObject>, maps: &Api<ConfigMap>, round: &str) -> (f64, f64) {
    let mut took = Vec::new();
    for i in 0..CHANGES {
        let x = format!("{round}-{i}");
        let started = Instant::now();
        let patch = json!({"spec": {"x": x}});
        quiets
            .patch("q", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the patch");
        loop {
            let seen = maps.get_opt("q-c").await.ok().flatten().and_then(|m| m.data);
            if seen.is_some_and(|d| d.get("x") == Some(&x)) {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        took.push(started.elapsed());
        tokio::time::sleep(Duration::from_secs(1).saturating_sub(started.elapsed())).await;
    }
    (percentile(&mut took, 0.5), percentile(&mut took, 0.99))
}

fn row(what: &str, host: &Host, probes: (f64, f64, usize), quiet: (f64, f64), extra: &str) {
    println!(
        "{what:<24} probe p50 {:>7.1} ms  p99 {:>7.1} ms  failed {:>3}  RSS {:>6.1} MiB  files {:>6}  quiet p50 {:>7.1} ms  p99 {:>7.1} ms  {extra}",
        probes.0,
        probes.1,
        probes.2,
        host.rss_mib(),
        host.files(),
        quiet.0,
        quiet.1,
    );
}

async fn bench() {
    let ork = std::env::var("ORK_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ork").to_string());
    let cluster = orkestra_test_support::cluster().expect("the local control plane");
    let ns = orkestra_test_support::namespace("doors").await.expect("a namespace");
    let group = format!("{}.doors.orkestra.io", ns.name);
    let text = katalog(&ns.name, &group);
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("katalog.yaml");
    std::fs::write(&file, &text).expect("the Katalog");
    let compiled = orkestra_katalog::load_sources(&[("katalog.yaml".into(), text)]).expect("a valid Katalog");
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, Duration::from_secs(60))
        .await
        .expect("the CRDs");
    let api = |kind: &str| -> Api<DynamicObject> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", kind));
        Api::namespaced_with(ns.client.clone(), &ns.name, &resource)
    };
    let create = |kind: &'static str, name: &'static str, spec: serde_json::Value| {
        let (api, group) = (api(kind), group.clone());
        async move {
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": format!("{group}/v1"), "kind": kind, "metadata": {"name": name}, "spec": spec}))
            .expect("a CR");
            api.create(&PostParams::default(), &object).await.expect("created");
        }
    };
    let host = Host::run(&ork, &file, &cluster.kubeconfig);
    println!("{ork}: {IDLE} idle connections, {PROBES} probes, {CHANGES} quiet changes per phase");
    create("Quiet", "q", json!({"x": "0"})).await;
    let started = Instant::now();
    while probes(&host.addr).await.2 > 0 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (quiets, maps) = (api("Quiet"), Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name));
    let calm = (probes(&host.addr).await, quiet_changes(&quiets, &maps, "calm").await);
    row("calm", &host, calm.0, calm.1, "");

    // Idle connections: opened, nothing sent.
    let mut held = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        match tokio::net::TcpStream::connect(&host.addr).await {
            Ok(stream) => held.push(stream),
            Err(_) => break,
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held_probes = probes(&host.addr).await;
    let open = host.files();
    let during = (held_probes, quiet_changes(&quiets, &maps, "idle").await);
    row(
        &format!("{} idle held", held.len()),
        &host,
        during.0,
        during.1,
        &format!("(runtime's open files with them held: {open})"),
    );
    drop(held);
    tokio::time::sleep(Duration::from_secs(2)).await;

    // A write storm: two CRs whose status holds a timestamp.
    create("Clock", "a", json!({})).await;
    create("Clock", "b", json!({})).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = writes(&host, "clock").await;
    let storm_started = Instant::now();
    let quiet = quiet_changes(&quiets, &maps, "storm").await;
    let left = STORM.saturating_sub(storm_started.elapsed());
    tokio::time::sleep(left).await;
    let rate = (writes(&host, "clock").await - before) / storm_started.elapsed().as_secs_f64();
    let storm_probes = probes(&host.addr).await;
    row(
        "timestamp status storm",
        &host,
        storm_probes,
        quiet,
        &format!("writes/s for the two clocks: {rate:.1}"),
    );
}
