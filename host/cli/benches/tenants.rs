//! What one tenant's floods of what the tenants share cost another tenant's reconciles
//! (issue 49's figures), on one `ork run` process against the local control plane. A quiet
//! tenant changes its CR (a Rust hook echoing a field into the status) once every 300 ms;
//! each change's time from the patch to its status is measured, calm and during each flood:
//! - the engine's pool: a component of 24 core instances kept warm for 16 namespaces by two
//!   CRDs, and another tenant's 24 CRs of it each spinning for its whole 2 s timeout;
//! - open files: 16 CRs whose hook opens its granted file until refused, every second;
//! - stalled bodies: 1,100 connections to the Live API, each a request whose body stops
//!   after its first byte, renewed as the runtime cuts them;
//! - an API spray: a tenant's hooks writing into the quiet tenant's namespace (every
//!   tenant's rate is 20 requests a second; the spray is charged to the tenant that makes it).
//!
//! Printed per phase: the quiet tenant's p50 and p99 and their ratio to calm, `/healthz`
//! probes (p99, failures), the runtime's RSS and open files; during the pool flood, the
//! pool's figures per tenant from `/tenants`.
//!
//! `ORK_BIN=/path/to/ork` measures another build. Needs the local control plane (`ork
//! control-plane install`) and the guest toolchains (`scripts/guests.sh --install`).
//! Run: `cargo bench -p orkestra-cli --bench tenants`.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks name the objects they create; no tenant input reaches these calls"
)]

use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_test_support::bench::{Host, percentile, probes};
use orkestra_test_support::{TestNamespace, guests, namespace};
use serde_json::{Value, json};

/// The quiet tenant's changes per phase, one every [`EVERY`].
const CHANGES: usize = 40;
const EVERY: Duration = Duration::from_millis(300);
const PROBES: usize = 20;
const STALLED: usize = 1_100;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(bench());
}

struct Paths {
    echo: String,
    fat: String,
    hostile: String,
}

fn katalog(group: &str, quiet: &str, paths: &Paths) -> String {
    let Paths { echo, fat, hostile } = paths;
    let fat_crd = |name: &str, kind: &str| {
        format!(
            "    {name}:
      apiTypes: {{group: {group}, version: v1, kind: {kind}}}
      operatorBox:
        reconcile:
          workers: 32
          hooks:
            component: {fat}
            instances: {{reuse: warm}}
            limits: {{timeout: 2s}}
"
        )
    };
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: tenants}}
spec:
  tenants:
    api: {{qps: 20, burst: 40}}
  crds:
    quiet:
      apiTypes: {{group: {group}, version: v1, kind: Quiet}}
      operatorBox:
        reconcile:
          hooks:
            component: {echo}
{}{}    files:
      apiTypes: {{group: {group}, version: v1, kind: Files}}
      operatorBox:
        reconcile:
          resync: 1s
          workers: 16
          hooks:
            component: {hostile}
            instances: {{reuse: warm}}
            files: [{{path: bundle, mountPath: /bundle}}]
    sprayer:
      apiTypes: {{group: {group}, version: v1, kind: Sprayer}}
      operatorBox:
        reconcile:
          resync: 1s
          hooks:
            component: {hostile}
            limits: {{timeout: 20s, kubeCalls: 100}}
            capabilities:
              - {{apiVersion: v1, kinds: [ConfigMap], verbs: [apply], namespaces: ['{quiet}']}}
",
        fat_crd("fat", "Fat"),
        fat_crd("fat2", "Fat2")
    )
}

struct Bench {
    client: kube::Client,
    group: String,
}

impl Bench {
    fn api(&self, kind: &str, namespace: &str) -> Api<DynamicObject> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&self.group, "v1", kind));
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }

    async fn create(&self, kind: &str, namespace: &str, name: &str, spec: Value) {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/v1", self.group), "kind": kind, "metadata": {"name": name}, "spec": spec}))
        .expect("a CR");
        let _ = self.api(kind, namespace).create(&PostParams::default(), &object).await;
    }

    async fn delete_all(&self, kind: &str, namespace: &str) {
        let _ = self
            .api(kind, namespace)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
    }

    /// The quiet tenant's changes: p50 and p99 in ms from the patch to its status.
    async fn quiet(&self, namespace: &str, round: &str) -> (f64, f64) {
        let quiets = self.api("Quiet", namespace);
        let mut took = Vec::new();
        for i in 0..CHANGES {
            let mode = format!("{round}-{i}");
            let started = Instant::now();
            let patch = json!({"spec": {"mode": mode}});
            quiets
                .patch("q", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("the patch");
            loop {
                let seen = quiets.get_opt("q").await.ok().flatten();
                if seen.is_some_and(|q| q.data["status"]["mode"] == mode.as_str()) {
                    break;
                }
                if started.elapsed() > Duration::from_secs(30) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            took.push(started.elapsed());
            tokio::time::sleep(EVERY.saturating_sub(started.elapsed())).await;
        }
        (percentile(&mut took, 0.5), percentile(&mut took, 0.99))
    }
}

fn row(what: &str, host: &Host, calm: (f64, f64), quiet: (f64, f64), probes: (f64, f64, usize)) {
    println!(
        "| {what:<30} | {:>8.1} | {:>8.1} | {:>5.2}x | {:>8.1} | {:>3} | {:>6.1} | {:>6} |",
        quiet.0,
        quiet.1,
        quiet.1 / calm.1,
        probes.1,
        probes.2,
        host.rss_mib(),
        host.files(),
    );
}

async fn namespaces(prefix: &str, count: usize) -> Vec<TestNamespace> {
    let mut made = Vec::new();
    for _ in 0..count {
        made.push(namespace(prefix).await.expect("a namespace"));
    }
    made
}

async fn bench() {
    let ork = std::env::var("ORK_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ork").to_string());
    let cluster = orkestra_test_support::cluster().expect("the local control plane");
    let path = |package: &str| guests::component(package).expect("the guest").display().to_string();
    let paths = Paths {
        echo: path("echo-hook"),
        fat: path("fat-instances"),
        hostile: path("hostile"),
    };
    let quiet = namespace("quiet").await.expect("a namespace");
    let group = format!("{}.tenants.orkestra.io", quiet.name);
    let dir = tempfile::tempdir().expect("a directory");
    std::fs::create_dir(dir.path().join("bundle")).expect("the bundle");
    std::fs::write(dir.path().join("bundle/policy.txt"), "allow").expect("the granted file");
    let text = katalog(&group, &quiet.name, &paths);
    let file = dir.path().join("katalog.yaml");
    std::fs::write(&file, &text).expect("the Katalog");
    let compiled = orkestra_katalog::load(std::slice::from_ref(&file)).expect("a valid Katalog");
    orkestra_kube::crd_install::install_crds(&quiet.client, &compiled.katalog, Duration::from_secs(60))
        .await
        .expect("the CRDs");
    let bench = Bench {
        client: quiet.client.clone(),
        group,
    };
    let host = Host::run(&ork, &file, &cluster.kubeconfig);
    bench.create("Quiet", &quiet.name, "q", json!({"mode": "start"})).await;
    let started = Instant::now();
    while probes(&host.addr, 1).await.2 > 0 && started.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Components compiled and the quiet CR reconciled once.
    bench.quiet(&quiet.name, "warm-up").await;
    println!("{ork}: the quiet tenant's change to its status, {CHANGES} changes a phase, one every {EVERY:?}\n");
    println!(
        "| phase                          | p50 (ms) | p99 (ms) | p99/calm | probe p99 | failed | RSS MiB | files |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let calm = bench.quiet(&quiet.name, "calm").await;
    row("calm", &host, calm, calm, probes(&host.addr, PROBES).await);

    // The engine's pool: kept warm for 16 namespaces by two CRDs, and 24 calls spinning
    // their whole timeout (retried with backoff) in another tenant.
    let teams = namespaces("team", 16).await;
    for team in &teams {
        for kind in ["Fat", "Fat2"] {
            bench.create(kind, &team.name, "keep", json!({})).await;
        }
    }
    let spinners = namespace("spin").await.expect("a namespace");
    for i in 0..24 {
        bench.create("Fat", &spinners.name, &format!("s{i}"), json!({})).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let flooded = bench.quiet(&quiet.name, "pool").await;
    let tenants: Value = reqwest::get(format!("http://{}/tenants", host.addr))
        .await
        .expect("/tenants")
        .json()
        .await
        .expect("JSON");
    row(
        "pool: 32 kept + 24 spinning",
        &host,
        calm,
        flooded,
        probes(&host.addr, PROBES).await,
    );
    for team in &teams {
        for kind in ["Fat", "Fat2"] {
            bench.delete_all(kind, &team.name).await;
        }
    }
    bench.delete_all("Fat", &spinners.name).await;
    tokio::time::sleep(Duration::from_secs(5)).await;

    // Open files: every second each CR's hook opens its granted file until refused.
    let opener = namespace("files").await.expect("a namespace");
    for i in 0..16 {
        bench
            .create(
                "Files",
                &opener.name,
                &format!("f{i}"),
                json!({"mode": "open-files", "count": 500}),
            )
            .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let flooded = bench.quiet(&quiet.name, "files").await;
    row(
        "open files: 16 CRs a second",
        &host,
        calm,
        flooded,
        probes(&host.addr, PROBES).await,
    );
    bench.delete_all("Files", &opener.name).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Stalled bodies on the Live API, renewed as they are cut.
    let live: std::net::SocketAddr = host.addr.parse().expect("an address");
    let stop = tokio::sync::watch::channel(false);
    let mut stopped = stop.1.clone();
    let head = format!(
        "POST /katalog HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n",
        host.addr
    );
    let flood = tokio::spawn(async move {
        while !*stopped.borrow() {
            let held = orkestra_test_support::idle::stalled(live, STALLED, 230, &head, false).await;
            let _ = tokio::time::timeout(Duration::from_secs(2), stopped.changed()).await;
            drop(held);
        }
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    let flooded = bench.quiet(&quiet.name, "stalled").await;
    row(
        "stalled bodies: 1,100",
        &host,
        calm,
        flooded,
        probes(&host.addr, PROBES).await,
    );
    let _ = stop.0.send(true);
    let _ = flood.await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // An API spray into the quiet tenant's namespace (every tenant's rate: 20 a second).
    let sprayer = namespace("spray").await.expect("a namespace");
    for i in 0..4 {
        bench
            .create(
                "Sprayer",
                &sprayer.name,
                &format!("p{i}"),
                json!({"mode": "spray", "target": quiet.name, "count": 40}),
            )
            .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let flooded = bench.quiet(&quiet.name, "spray").await;
    row(
        "API spray into its namespace",
        &host,
        calm,
        flooded,
        probes(&host.addr, PROBES).await,
    );
    bench.delete_all("Sprayer", &sprayer.name).await;

    println!("\nThe engine's pool during the pool flood (from /tenants):");
    let pool = &tenants["wasmPool"];
    println!(
        "  size {}; held {}; one instance may take {}",
        pool["total"], pool["used"], pool["instanceAllowance"]
    );
    for tenant in pool["tenants"].as_array().into_iter().flatten() {
        println!(
            "  {:<24} held {}  share {}  kept {}",
            tenant["tenant"].as_str().unwrap_or_default(),
            tenant["held"],
            tenant["share"],
            tenant["kept"]
        );
    }
}
