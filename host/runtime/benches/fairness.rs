//! One namespace's backlog against another namespace's new CR, on the real control plane:
//! N CRs of a `noisy` namespace exist when the runtime starts (2 workers; one ConfigMap and a
//! Ready status per CR), and as soon as the first of them is Ready one CR is created in a
//! `quiet` namespace. Printed per N and per queue (the default fair queue, and one flow
//! first in, first out: `fairness.by: none`, `priority.aging: 0s`): the quiet CR's time to
//! Ready behind the backlog, the same CR's time to Ready with the queue idle, how many noisy
//! CRs were not Ready yet when the quiet one was, and how long the whole backlog took (the
//! throughput each queue gives).
//!
//! First, without a cluster, the queue alone in virtual time: background work (a resync of
//! 500 CRs) under user changes arriving faster than 2 workers serve them, for 60 s: the
//! longest wait of the background work and the users' p50/p99, with strict priorities (no
//! aging), with the default aging, and first in, first out.
//!
//! Needs the local control plane (`ork control-plane install`).
//! Run: `ORK_BENCH_BACKLOG=3000,10000 cargo bench -p orkestra --bench fairness` (default 3000;
//! `ORK_BENCH_QUEUES=fifo,fair` picks the queues and their order, default `fair,fifo`).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks name the objects they create; no tenant input reaches these calls"
)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use orkestra_test_support::namespace;
use parking_lot::Mutex;
use serde_json::{Value, json};

const WORKERS: usize = 2;
/// How long a CR may take to be Ready before the run gives up.
const PATIENCE: Duration = Duration::from_secs(1200);

/// The two queues compared: the default, and one flow in arrival order.
const QUEUES: [(&str, &str); 2] = [
    ("fair", "{}"),
    ("fifo", "{fairness: {by: none}, priority: {aging: 0s}}"),
];

fn katalog_text(group: &str, queue: &str) -> String {
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
          queue: {queue}
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

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<String, Instant>> {
        self.0.lock()
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
    queue: &'static str,
    behind: Duration,
    idle: Duration,
    not_ready_then: usize,
    drained: Duration,
}

async fn run(backlog: usize, (queue, queue_yaml): (&'static str, &str)) -> Row {
    let noisy = namespace("noisy").await.expect("a namespace");
    let quiet = namespace("quiet").await.expect("a namespace");
    let client = noisy.client.clone();
    let group = format!("{}.fairness.orkestra.io", noisy.name);
    let katalog = orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text(&group, queue_yaml))])
        .expect("the Katalog");
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
        queue,
        behind,
        idle,
        not_ready_then,
        drained,
    }
}

/// One run of the queue alone in virtual time: what waited how long.
struct Aged {
    label: &'static str,
    /// The longest wait of the resync's items; `None`: some never ran.
    background_max: Option<Duration>,
    background_left: usize,
    user_p50: Duration,
    user_p99: Duration,
    served: usize,
}

/// User changes arrive every 4 ms (250 a second) for 60 s; 2 workers take 10 ms an item (200
/// a second); a resync of 500 CRs is queued at the start. All in one namespace.
async fn aged(label: &'static str, aging: Duration) -> Aged {
    use orkestra::pipeline::flows::{Class, FlowRules};
    use orkestra::pipeline::queue::{Outcome, Payload, QueueItem, WorkQueue};
    const RESYNC: usize = 500;
    const LENGTH: Duration = Duration::from_secs(60);
    let queue = WorkQueue::with_rules(FlowRules {
        aging,
        ..FlowRules::default()
    });
    let item = |key: String| QueueItem {
        key,
        gvk: "bench.io/v1/Item".into(),
        event_id: None,
    };
    for i in 0..RESYNC {
        let payload = Payload {
            class: Class::Background,
            ..Payload::default()
        };
        queue.add(item(format!("ns/resync-{i}")), payload);
    }
    let waits = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (queue, waits) = (queue.clone(), waits.clone());
            tokio::spawn(async move {
                while let Some(lease) = queue.next().await {
                    {
                        let mut waits = waits.lock();
                        let list = if lease.item.key.contains("resync") {
                            &mut waits.0
                        } else {
                            &mut waits.1
                        };
                        list.push(lease.waited);
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    queue.done(lease, Outcome::Success);
                }
            })
        })
        .collect();
    let start = tokio::time::Instant::now();
    let mut n = 0;
    while start.elapsed() < LENGTH {
        queue.add(item(format!("ns/user-{n}")), Payload::default());
        n += 1;
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    queue.shutdown();
    for worker in workers {
        let _ = worker.await;
    }
    let (background, mut user) = std::mem::take(&mut *waits.lock());
    user.sort();
    let at = |q: f64| {
        user.get(((user.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    Aged {
        label,
        background_max: (background.len() == RESYNC).then(|| background.iter().max().copied().unwrap_or_default()),
        background_left: RESYNC - background.len(),
        user_p50: at(0.5),
        user_p99: at(0.99),
        served: background.len() + user.len(),
    }
}

fn main() {
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("tokio");
    let aging = orkestra_katalog::compile::AGING;
    let aged_rows = [
        ("strict priority (no aging)", Duration::from_secs(3600)),
        ("aging 10s (the default)", aging),
        ("first in, first out", Duration::ZERO),
    ]
    .map(|(label, aging)| paused.block_on(aged(label, aging)));
    println!("Background work under sustained user changes (the queue alone, virtual time): a resync of 500");
    println!("CRs queued at the start, user changes at 250/s for 60 s, {WORKERS} workers at 10 ms an item (200/s).");
    println!("| queue | longest wait of the resync's items | user changes' wait p50 | p99 | items served |");
    println!("|---|---|---|---|---|");
    for row in aged_rows {
        let longest = match row.background_max {
            Some(wait) => format!("{:.1} s", wait.as_secs_f64()),
            None => format!("{} of 500 never ran", row.background_left),
        };
        println!(
            "| {} | {longest} | {:.2} s | {:.2} s | {} |",
            row.label,
            row.user_p50.as_secs_f64(),
            row.user_p99.as_secs_f64(),
            row.served
        );
    }
    println!();

    let sizes: Vec<usize> = std::env::var("ORK_BENCH_BACKLOG")
        .unwrap_or_else(|_| "3000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("ORK_BENCH_BACKLOG: numbers, comma separated"))
        .collect();
    // In the order given: each run leaves its CRs on the control plane, so a later run meets
    // a fuller etcd; swap the order to see how much that weighs.
    let queues: Vec<(&'static str, &'static str)> = match std::env::var("ORK_BENCH_QUEUES") {
        Ok(only) => only
            .split(',')
            .filter_map(|name| QUEUES.into_iter().find(|(known, _)| *known == name.trim()))
            .collect(),
        Err(_) => QUEUES.to_vec(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let mut rows = Vec::new();
    for backlog in sizes {
        for queue in &queues {
            eprintln!("a backlog of {backlog} CRs, {} queue", queue.0);
            rows.push(runtime.block_on(run(backlog, *queue)));
        }
    }
    println!("Fairness: a quiet namespace's new CR behind a noisy namespace's backlog, {WORKERS} workers,");
    println!("kube-apiserver with kube-controller-manager on this machine.");
    println!("| backlog | queue | quiet CR Ready behind it | idle | noisy CRs not Ready then | backlog drained in |");
    println!("|---|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {:.3} s | {:.3} s | {} | {:.1} s |",
            row.backlog,
            row.queue,
            row.behind.as_secs_f64(),
            row.idle.as_secs_f64(),
            row.not_ready_then,
            row.drained.as_secs_f64()
        );
    }
    for fair in rows.iter().filter(|r| r.queue == "fair") {
        if let Some(fifo) = rows.iter().find(|r| r.queue == "fifo" && r.backlog == fair.backlog) {
            println!(
                "backlog {}: the fair queue drained it in {:.1}% of the first-in, first-out queue's time",
                fair.backlog,
                100.0 * fair.drained.as_secs_f64() / fifo.drained.as_secs_f64()
            );
        }
    }
}
