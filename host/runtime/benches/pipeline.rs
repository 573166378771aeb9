//! Pipeline figures: events per second from an in-process event source through the
//! primary observer (cache, sentinels), admission (enqueue gate), the queue and the
//! Kordinator (reconcile gate, dispatch) to a no-op reconciler; and the p99 latency from
//! enqueue to dispatch at a steady 1k events/s. Targets: at least 100k events/s, p99 under
//! 1 ms. For comparison, a kube-runtime Controller does the same no-op work on the same
//! synthetic stream. Run: `cargo bench -p orkestra --bench pipeline`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action as KubeAction, Controller};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use orkestra::outcome::counters::Counters;
use orkestra::outcome::failure::ReconcileError;
use orkestra::outcome::health::HealthBoard;
use orkestra::pipeline::enqueue::{Admission, Stats};
use orkestra::pipeline::kordinator::Kordinator;
use orkestra::pipeline::mux::{Action, Form, MuxReconciler, Reconciled, Reconciler, Request};
use orkestra::pipeline::observe::{Cache, PrimaryObserver};
use orkestra::pipeline::queue::WorkQueue;
use orkestra::pipeline::tuning::Tuning;
use orkestra_katalog::compile::CompiledCrd;
use parking_lot::Mutex;
use serde_json::json;

const EVENTS: usize = 100_000;
const WORKERS: &str = "4";

/// Counts dispatches and, when asked, records enqueue→dispatch latency.
struct NoOp {
    done: AtomicU64,
    enqueued_at: Mutex<HashMap<String, Instant>>,
    latencies: Mutex<Vec<Duration>>,
}

impl Reconciler for NoOp {
    fn form(&self) -> Form {
        Form::Constructor
    }

    fn reconcile<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Reconciled, ReconcileError>> {
        Box::pin(async move {
            if let Some(at) = self.enqueued_at.lock().remove(&request.key) {
                self.latencies.lock().push(at.elapsed());
            }
            self.done.fetch_add(1, Ordering::Relaxed);
            Ok(Action::Done.into())
        })
    }
}

fn crd() -> Arc<CompiledCrd> {
    let text = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
spec:
  crds:
    web:
      apiTypes: {{group: bench.orkestra.io, version: v1, kind: Web}}
      crossAccess: false
      endpoints: {{health: false}}
      operatorBox:
        preReconcile:
          sentinels: [generationChanged]
          enqueueGate:
            when: [{{field: spec.enabled, equals: 'true'}}]
          reconcileGate:
            when: [{{field: metadata.labels.tier, exists: true}}]
        reconcile:
          workers: {WORKERS}
"
    );
    let katalog = orkestra_katalog::load_sources(&[("bench.yaml".into(), text)]).expect("katalog");
    katalog.crds["web"].clone()
}

fn object(i: usize) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "bench.orkestra.io/v1", "kind": "Web",
        "metadata": {"name": format!("web-{i}"), "namespace": "bench", "generation": 1, "labels": {"tier": "gold"}},
        "spec": {"enabled": true, "image": "nginx", "replicas": 3},
    }))
    .expect("object")
}

struct Pipeline {
    observer: PrimaryObserver,
    reconciler: Arc<NoOp>,
    queue: WorkQueue,
    workers: tokio::task::JoinSet<()>,
}

fn pipeline() -> Pipeline {
    let crd = crd();
    let (cache, queue) = (Cache::default(), WorkQueue::new());
    let tuning = Arc::new(Tuning::new(&crd));
    let admission = Admission::new(
        crd.clone(),
        cache.clone(),
        queue.clone(),
        Arc::new(Stats::default()),
        tuning.clone(),
        Default::default(),
    );
    let observer = PrimaryObserver::new(
        cache.clone(),
        crd.declared_sentinels(),
        admission,
        Default::default(),
        None,
    );
    let reconciler = Arc::new(NoOp {
        done: AtomicU64::new(0),
        enqueued_at: Mutex::default(),
        latencies: Mutex::default(),
    });
    let health = HealthBoard::default();
    health.register(&crd.name, orkestra_katalog::FailureThreshold::InARow(5));
    // No API server: the recorder writes no CR and the Katalog reads no stamp (its health
    // endpoint is off), so nothing is stamped and the client is never used.
    let offline = kube::Config::new("http://127.0.0.1:9".parse().expect("uri"));
    let counters = Arc::new(Counters::default());
    let stamps = Arc::new(orkestra::pipeline::feedback::StampSource {
        crd: crd.clone(),
        health: health.clone(),
        tuning: tuning.clone(),
        counters: counters.clone(),
    });
    let kordinator = Arc::new(Kordinator {
        client: kube::Client::try_from(offline).expect("client"),
        externals: Default::default(),
        crd: crd.clone(),
        resource: Arc::new(ApiResource::from_gvk(&GroupVersionKind::gvk(
            "bench.orkestra.io",
            "v1",
            "Web",
        ))),
        cache,
        queue: queue.clone(),
        mux: MuxReconciler::new(reconciler.clone()),
        health,
        counters,
        tuning,
        ownership: orkestra::ha::Ownership::default(),
        own: Arc::default(),
        budget: Arc::default(),
        stamps,
    });
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..crd.workers {
        workers.spawn(kordinator.clone().work());
    }
    Pipeline {
        observer,
        reconciler,
        queue,
        workers,
    }
}

async fn wait_for(counter: &AtomicU64, n: u64) {
    while counter.load(Ordering::Relaxed) < n {
        tokio::task::yield_now().await;
    }
}

async fn throughput() -> f64 {
    let objects: Vec<DynamicObject> = (0..EVENTS).map(object).collect();
    let Pipeline {
        mut observer,
        reconciler,
        queue,
        mut workers,
    } = pipeline();
    let start = Instant::now();
    for (i, object) in objects.into_iter().enumerate() {
        observer.handle(watcher::Event::Apply(object));
        if i % 1024 == 0 {
            tokio::task::yield_now().await;
        }
    }
    wait_for(&reconciler.done, EVENTS as u64).await;
    let rate = EVENTS as f64 / start.elapsed().as_secs_f64();
    queue.shutdown();
    while workers.join_next().await.is_some() {}
    rate
}

async fn latency() -> (Duration, Duration, usize) {
    let Pipeline {
        mut observer,
        reconciler,
        queue,
        mut workers,
    } = pipeline();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let events = 5_000;
    for i in 0..events {
        tick.tick().await;
        let object = object(i);
        reconciler
            .enqueued_at
            .lock()
            .insert(format!("bench/web-{i}"), Instant::now());
        observer.handle(watcher::Event::Apply(object));
    }
    wait_for(&reconciler.done, events as u64).await;
    queue.shutdown();
    while workers.join_next().await.is_some() {}
    let mut latencies = reconciler.latencies.lock().clone();
    latencies.sort();
    (
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 99 / 100],
        latencies.len(),
    )
}

/// The same no-op work through kube-runtime's Controller, fed the same synthetic objects.
async fn kube_runtime_throughput() -> f64 {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("bench.orkestra.io", "v1", "Web"));
    let mut writer: Writer<DynamicObject> = Writer::new(resource.clone());
    let reader = writer.as_reader();
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let objects: Vec<DynamicObject> = (0..EVENTS).map(object).collect();
    for object in &objects {
        writer.apply_watcher_event(&watcher::Event::Apply(object.clone()));
    }
    let (sender, receiver) = futures::channel::mpsc::unbounded::<Result<DynamicObject, watcher::Error>>();
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    for object in objects {
        let _ = sender.unbounded_send(Ok(object));
    }
    let counted = done.clone();
    let controller = Controller::for_stream_with(receiver, reader, resource).run(
        |_object: Arc<DynamicObject>, done: Arc<AtomicU64>| async move {
            done.fetch_add(1, Ordering::Relaxed);
            Ok::<_, std::convert::Infallible>(KubeAction::await_change())
        },
        |_object, _error: &std::convert::Infallible, _done| KubeAction::await_change(),
        counted,
    );
    let running = tokio::spawn(controller.for_each(|_| async {}));
    wait_for(&done, EVENTS as u64).await;
    let rate = EVENTS as f64 / start.elapsed().as_secs_f64();
    running.abort();
    rate
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(async {
        // Warm up allocators and caches once.
        let _ = throughput().await;
        let ours = throughput().await;
        let (p50, p99, samples) = latency().await;
        let theirs = kube_runtime_throughput().await;
        let verdict = |ok: bool| if ok { "within" } else { "OVER" };
        println!(
            "pipeline throughput ({EVENTS} events, {WORKERS} workers, both gates)  {ours:>10.0} events/s   target >= 100000 ({})",
            verdict(ours >= 100_000.0)
        );
        println!(
            "enqueue→dispatch at 1k events/s ({samples} samples)        p50 {:>6.1} µs   p99 {:>6.1} µs   target p99 < 1 ms ({})",
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6,
            verdict(p99 < Duration::from_millis(1))
        );
        println!("kube-runtime Controller, same no-op stream              {theirs:>10.0} events/s");
        println!("ratio (ours / kube-runtime)                             {:>10.2}", ours / theirs);
    });
}
