//! What a flood of hostile tenants costs the host and its other tenants: one runtime, against
//! the real control plane, hosting the `site-hook` tenant (a Rust hook next to templates) and
//! the hostile example components in their flooding modes (100,000 events, 600 children, a
//! million log lines, lists of 6 MB of ConfigMaps, requeue-after(0), eight 30 MiB memories
//! under a 32 MiB limit, 60 KB failure messages). Printed: the host process's RSS (calm,
//! peak during the flood, after), the latency of the calm tenant's updates (calm and during),
//! the bytes of log the host wrote at its default level, the hostile CRD's reconciles and
//! writes, the events recorded for the event flood, and how long a graceful shutdown took.
//! Needs the local control plane (`ork control-plane install`) and the guest toolchains
//! (`scripts/guests.sh --install`). Run: `cargo bench -p orkestra --bench flood`.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks name the objects they create; no tenant input reaches these calls"
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra::runtime::Runtime;
use orkestra_test_support::{guests, namespace};
use serde_json::json;

/// How long the flood runs while the calm tenant is measured.
const FLOOD: Duration = Duration::from_secs(40);

/// Bytes of log the host writes, at its default level (warnings and errors), counted.
#[derive(Clone, Default)]
struct Counted(Arc<AtomicU64>);

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Counted {
    type Writer = Counted;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Resident set size of this process, in MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn katalogs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs")
}

fn crs(client: &kube::Client, ns: &str, group: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1", kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Sets the calm site's body; the time until its page shows it.
async fn site_update(sites: &Api<DynamicObject>, pages: &Api<ConfigMap>, body: &str) -> Duration {
    let started = Instant::now();
    let patch = json!({"spec": {"body": body}});
    sites
        .patch("blog", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch the site");
    let wanted = format!("<p>{body}</p>");
    loop {
        let page = pages.get_opt("blog-content").await.ok().flatten();
        let text = page.and_then(|p| p.data).and_then(|d| d.get("index.html").cloned());
        if text.is_some_and(|t| t.contains(&wanted)) {
            return started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(120) {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn millis(samples: &[Duration]) -> String {
    let mut sorted: Vec<u128> = samples.iter().map(Duration::as_millis).collect();
    sorted.sort_unstable();
    format!(
        "p50 {} ms, max {} ms ({} updates)",
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1],
        sorted.len()
    )
}

fn main() {
    let log = Counted::default();
    tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_max_level(tracing::Level::WARN)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(flood(log));
}

async fn flood(log: Counted) {
    for package in ["hostile", "rust-hook"] {
        guests::component(package).expect("build the example guests");
    }
    let hoarder = guests::component("many-memories").expect("assemble many-memories");
    let ns = namespace("flood").await.expect("a namespace on the control plane");
    let dir = tempfile::tempdir().expect("temp dir");
    let hoard_file = dir.path().join("hoard.yaml");
    std::fs::write(
        &hoard_file,
        format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {{name: hoard}}\nspec:\n  crds:\n    hoard:\n      apiTypes: {{group: sandbox.orkestra.io, version: v1, kind: Hoard, plural: hoards}}\n      operatorBox:\n        reconcile:\n          hooks:\n            component: {}\n            limits: {{memory: 32Mi}}\n",
            hoarder.display()
        ),
    )
    .expect("write the hoard Katalog");
    let files = [
        katalogs().join("site-hook/katalog.yaml"),
        katalogs().join("hostile/katalog.yaml"),
        hoard_file,
    ];
    let mut katalog = orkestra_katalog::load(&files).expect("load the Katalogs");
    for crd in katalog.crds.values_mut() {
        std::sync::Arc::make_mut(crd).namespace = Some(ns.name.clone());
    }
    orkestra_kube::crd_install::install_crds(&ns.client, &katalog.katalog, Duration::from_secs(60))
        .await
        .expect("install the CRDs");
    let host = Runtime::new(ns.client.clone(), &katalog).expect("compile the Katalogs");
    let hostile = host.crd("hostile").expect("the hostile CRD");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(host.run(async {
        let _ = stopped.await;
    }));

    let client = &ns.client;
    orkestra_kube::manifests::apply_file(client, &katalogs().join("site-hook/samples/site.yaml"), &ns.name)
        .await
        .expect("the sample site");
    let sites = crs(client, &ns.name, "hooks.orkestra.io", "Site");
    let pages: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    site_update(&sites, &pages, "warm up").await;
    let mut calm = Vec::new();
    for i in 0..5 {
        calm.push(site_update(&sites, &pages, &format!("calm {i}")).await);
    }
    let rss_calm = rss_mib();
    let log_calm = log.0.load(Ordering::Relaxed);

    // 6 MB of ConfigMaps for the listing tenants.
    for i in 0..30 {
        let bulk: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("bulk-{i}")}, "data": {"blob": "b".repeat(200_000)}}),
        )
        .expect("a ConfigMap");
        pages.create(&PostParams::default(), &bulk).await.expect("create bulk");
    }
    let hostiles = crs(client, &ns.name, "sandbox.orkestra.io", "Hostile");
    let modes = [
        ("shout", "events"),
        ("breed", "children"),
        ("chat", "logs"),
        ("list-a", "list"),
        ("list-b", "list"),
        ("spin-a", "requeue0"),
        ("spin-b", "requeue0"),
        ("spin-c", "requeue0"),
        ("ramble", "long-failure"),
    ];
    let started = Instant::now();
    for (name, mode) in modes {
        // 600 children fit the hostile Katalog's 64Ki resultSize.
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "sandbox.orkestra.io/v1", "kind": "Hostile", "metadata": {"name": name},
            "spec": {"mode": mode, "count": 600},
        }))
        .expect("a Hostile");
        hostiles.create(&PostParams::default(), &object).await.expect("create");
    }
    let hoards = crs(client, &ns.name, "sandbox.orkestra.io", "Hoard");
    let hoard: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sandbox.orkestra.io/v1", "kind": "Hoard", "metadata": {"name": "h"}, "spec": {},
    }))
    .expect("a Hoard");
    hoards.create(&PostParams::default(), &hoard).await.expect("create");

    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max((rss_mib() * 1024.0) as u64, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut during = Vec::new();
    let mut i = 0;
    while started.elapsed() < FLOOD {
        during.push(site_update(&sites, &pages, &format!("storm {i}")).await);
        i += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let log_flood = log.0.load(Ordering::Relaxed) - log_calm;
    let reconciles = hostile.counters.reconciles.load(Ordering::Relaxed);
    let writes = hostile.counters.writes.load(Ordering::Relaxed);
    sampler.abort();
    let _ = stop.send(());
    let stopping = Instant::now();
    let _ = running.await;
    let shutdown = stopping.elapsed();
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    let recorded: i64 = events
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("shout"))
                .map(|e| e.series.as_ref().map_or(1, |s| i64::from(s.count)))
                .sum()
        })
        .unwrap_or(-1);
    let children = pages
        .list(&ListParams::default().labels("orkestra-owner=breed"))
        .await
        .map(|l| l.items.len())
        .unwrap_or(0);
    println!("flood of hostile tenants, {} s, 2 worker threads:", FLOOD.as_secs());
    println!(
        "  host RSS: calm {rss_calm:.0} MiB, peak during {:.0} MiB, after {:.0} MiB",
        peak.load(Ordering::Relaxed) as f64 / 1024.0,
        rss_mib()
    );
    println!(
        "  calm tenant's updates: before {}, during {}",
        millis(&calm),
        millis(&during)
    );
    println!(
        "  host log at its default level during the flood: {:.1} MB ({:.0} KB/s)",
        log_flood as f64 / 1e6,
        log_flood as f64 / 1e3 / FLOOD.as_secs_f64()
    );
    println!("  hostile CRD: {reconciles} reconciles, {writes} writes; {children} flood children applied");
    println!("  events recorded for the event flood (with repeats): {recorded}");
    println!("  graceful shutdown took {} ms", shutdown.as_millis());
}
