//! One namespace's backlog against another namespace's new CR, on the real control plane:
//! N CRs of a `noisy` namespace exist when the runtime starts (2 workers; one ConfigMap and a
//! Ready status per CR), and as soon as the first of them is Ready one CR is created in a
//! `quiet` namespace. Printed per N: the quiet CR's time to Ready behind the backlog, the
//! same CR's time to Ready with the queue idle, how many noisy CRs were not Ready yet when
//! the quiet one was, and how long the whole backlog took (what a first-in, first-out queue
//! would have made the quiet CR wait).
//!
//! Needs the local control plane (`ork control-plane install`).
//! Run: `ORK_BENCH_BACKLOG=3000,10000 cargo bench -p orkestra --bench fairness` (default 3000).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks name the objects they create; no tenant input reaches these calls"
)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use orkestra_test_support::namespace;
use serde_json::{Value, json};

const WORKERS: usize = 2;
/// How long a CR may take to be Ready before the run gives up.
const PATIENCE: Duration = Duration::from_secs(1200);

fn katalog_text(group: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: fairness}}
spec:
  crds:
    item:
      apiTypes: {{group: {group}, version: v1, kind: Item, plural: items}}
      operatorBox:
        reconcile:
          workers: {WORKERS}
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}', data: {{value: x}}}}
"
    )
}

fn resource(group: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Item"), "items")
}

fn is_ready(cr: &Value) -> bool {
    cr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// When each CR (`namespace/name`) was first seen Ready, by a watch of every namespace.
#[derive(Clone, Default)]
struct Readiness(Arc<Mutex<HashMap<String, Instant>>>);

impl Readiness {
    fn watch(&self, client: kube::Client, resource: ApiResource) -> tokio::task::JoinHandle<()> {
        let seen = self.clone();
        tokio::spawn(async move {
            let items = Api::<DynamicObject>::all_with(client, &resource);
            let mut events = std::pin::pin!(watcher(items, watcher::Config::default()));
            while let Ok(Some(event)) = events.try_next().await {
                if let watcher::Event::Apply(cr) | watcher::Event::InitApply(cr) = event
                    && is_ready(&cr.data)
                {
                    let key = format!(
                        "{}/{}",
                        cr.metadata.namespace.unwrap_or_default(),
                        cr.metadata.name.unwrap_or_default()
                    );
                    seen.lock().entry(key).or_insert_with(Instant::now);
                }
            }
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How many CRs of `namespace` are Ready.
    fn ready_in(&self, namespace: &str) -> usize {
        let prefix = format!("{namespace}/");
        self.lock().keys().filter(|k| k.starts_with(&prefix)).count()
    }

    /// Waits until `check` holds, polling every 10 ms.
    async fn until(&self, what: &str, check: impl Fn(&Self) -> bool) {
        let waited = tokio::time::timeout(PATIENCE, async {
            while !check(self) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        waited.unwrap_or_else(|_| panic!("{what} in time"));
    }

    fn ready_at(&self, key: &str) -> Option<Instant> {
        self.lock().get(key).copied()
    }
}

async fn create(api: &Api<DynamicObject>, group: &str, name: &str) {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Item", "metadata": {"name": name}, "spec": {},
    }))
    .expect("an Item");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create an Item");
}

/// What one backlog size showed.
struct Row {
    backlog: usize,
    behind: Duration,
    idle: Duration,
    not_ready_then: usize,
    drained: Duration,
}

async fn run(backlog: usize) -> Row {
    let noisy = namespace("noisy").await.expect("a namespace");
    let quiet = namespace("quiet").await.expect("a namespace");
    let client = noisy.client.clone();
    let group = format!("{}.fairness.orkestra.io", noisy.name);
    let katalog =
        orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text(&group))]).expect("the Katalog");
    orkestra_kube::crd_install::install_crds(&client, &katalog.katalog, Duration::from_secs(60))
        .await
        .expect("the CRD");
    let resource = resource(&group);
    let noisy_items = Api::<DynamicObject>::namespaced_with(client.clone(), &noisy.name, &resource);
    let quiet_items = Api::<DynamicObject>::namespaced_with(client.clone(), &quiet.name, &resource);
    futures::stream::iter(0..backlog)
        .for_each_concurrent(20, |i| {
            let (items, group) = (noisy_items.clone(), group.clone());
            async move { create(&items, &group, &format!("item-{i}")).await }
        })
        .await;

    let readiness = Readiness::default();
    let watching = readiness.watch(client.clone(), resource);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let started = Instant::now();
    let host = orkestra::Runtime::new(client, &katalog).expect("compile");
    let running = tokio::spawn(host.run(async {
        let _ = stopped.await;
    }));
    let noisy_ns = noisy.name.clone();
    readiness
        .until("the first noisy CR Ready", |r| r.ready_in(&noisy_ns) > 0)
        .await;
    let asked = Instant::now();
    create(&quiet_items, &group, "behind").await;
    let behind_key = format!("{}/behind", quiet.name);
    readiness
        .until("the quiet CR Ready", |r| r.ready_at(&behind_key).is_some())
        .await;
    let behind = readiness.ready_at(&behind_key).expect("Ready") - asked;
    let not_ready_then = backlog - readiness.ready_in(&noisy.name);
    readiness
        .until("the whole backlog Ready", |r| r.ready_in(&noisy_ns) == backlog)
        .await;
    let drained = started.elapsed();
    let asked = Instant::now();
    create(&quiet_items, &group, "idle").await;
    let idle_key = format!("{}/idle", quiet.name);
    readiness
        .until("the idle CR Ready", |r| r.ready_at(&idle_key).is_some())
        .await;
    let idle = readiness.ready_at(&idle_key).expect("Ready") - asked;
    let _ = stop.send(());
    let _ = running.await;
    watching.abort();
    Row {
        backlog,
        behind,
        idle,
        not_ready_then,
        drained,
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::var("ORK_BENCH_BACKLOG")
        .unwrap_or_else(|_| "3000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("ORK_BENCH_BACKLOG: numbers, comma separated"))
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let mut rows = Vec::new();
    for backlog in sizes {
        eprintln!("a backlog of {backlog} CRs");
        rows.push(runtime.block_on(run(backlog)));
    }
    println!("Fairness: a quiet namespace's new CR behind a noisy namespace's backlog, {WORKERS} workers,");
    println!("kube-apiserver with kube-controller-manager on this machine.");
    println!("| backlog | quiet CR Ready behind it | idle | noisy CRs not Ready then | backlog drained in |");
    println!("|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {:.3} s | {:.3} s | {} | {:.1} s |",
            row.backlog,
            row.behind.as_secs_f64(),
            row.idle.as_secs_f64(),
            row.not_ready_then,
            row.drained.as_secs_f64()
        );
    }
}
