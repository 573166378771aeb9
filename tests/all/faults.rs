//! Faults, each against a control plane of its own (so killing it harms no other test):
//! the API server or etcd killed with SIGKILL mid-convergence and restarted, a watch whose
//! resourceVersion etcd compacted away (410 Gone, a relist), a competing writer, and a slow
//! API server that drops connections. Each ends with every CR converged, no child lost or
//! extra, and the settled CRs costing no writes; each prints its time to reconverge.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra::runtime::{CrdHandle, Runtime};
use orkestra_control_plane::{ControlPlane, Options};
use orkestra_test_support::eventually;
use serde_json::json;

/// A control plane, a runtime on it, and CRs of kind Item each making ConfigMap `<name>-c`.
struct Fault {
    plane: ControlPlane,
    _dir: tempfile::TempDir,
    /// The test's own client (straight to the API server).
    client: kube::Client,
    ns: String,
    crs: Api<DynamicObject>,
    handle: CrdHandle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

const NS: &str = "faults";
const GROUP: &str = "faults.orkestra.io";

impl Fault {
    /// Starts a control plane, its namespace and the CRD; with `gc`, the controller manager
    /// too (its garbage collector deletes the children of deleted CRs).
    async fn start(
        name: &str,
        gc: bool,
    ) -> (
        ControlPlane,
        tempfile::TempDir,
        kube::Client,
        orkestra_katalog::Compiled,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut options = Options::new(dir.path().join(name));
        options.controller_manager = gc;
        options.nodes = 0;
        let plane = ControlPlane::start(options).await.unwrap();
        let client = plane.client().await.unwrap();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        namespaces.create(&PostParams::default(), &ns).await.unwrap();
        let text = orkestra_test_support::configmap_katalog(name, "items", GROUP, "Item", NS, 8);
        let katalog = orkestra_katalog::load_sources(&[("katalog.yaml".into(), text)]).unwrap();
        orkestra_kube::crd_install::install_crds(&client, &katalog.katalog, Duration::from_secs(60))
            .await
            .unwrap();
        (plane, dir, client, katalog)
    }

    /// A runtime straight on a new control plane.
    async fn new(name: &str, gc: bool) -> Self {
        let (plane, dir, client, katalog) = Self::start(name, gc).await;
        let fault = Self::with_runtime_client(plane, dir, client.clone(), &katalog, client);
        fault.wait_started().await;
        fault
    }

    fn with_runtime_client(
        plane: ControlPlane,
        dir: tempfile::TempDir,
        client: kube::Client,
        katalog: &orkestra_katalog::Compiled,
        runtime_client: kube::Client,
    ) -> Self {
        let runtime = Runtime::new(runtime_client, katalog).unwrap();
        let handle = runtime.crd("items").unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(runtime.run(async {
            let _ = stopped.await;
        }));
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, "v1", "Item"));
        Self {
            crs: Api::namespaced_with(client.clone(), NS, &resource),
            plane,
            _dir: dir,
            client,
            ns: NS.into(),
            handle,
            stop: Some(stop),
            task: Some(task),
        }
    }

    async fn wait_started(&self) {
        eventually("the runtime's first list", Duration::from_secs(60), || async {
            (self.handle.cache.lists() >= 1).then_some(())
        })
        .await
        .unwrap();
    }

    /// Creates CRs `i0..i{count}` with `value`, sixteen at a time.
    async fn create(&self, count: usize, value: &str) {
        let api_version = format!("{GROUP}/v1");
        futures::stream::iter(0..count)
            .map(|i| {
                let cr: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": api_version, "kind": "Item",
                    "metadata": {"name": format!("i{i}")}, "spec": {"value": value},
                }))
                .unwrap();
                let crs = self.crs.clone();
                async move { crs.create(&PostParams::default(), &cr).await.unwrap() }
            })
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;
    }

    /// Sets `spec.value` of every CR (retrying while the API server is away).
    async fn update_all(&self, value: &str) {
        let names: Vec<String> = self
            .crs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        futures::stream::iter(names)
            .map(|name| {
                let crs = self.crs.clone();
                let patch = json!({"spec": {"value": value}});
                async move {
                    crs.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .unwrap()
                }
            })
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;
    }

    /// How many CRs have converged on `value` (None while the API server does not answer).
    async fn converged_count(&self, value: &str) -> Option<(usize, usize, usize)> {
        let maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.ns);
        let crs = self.crs.list(&ListParams::default()).await.ok()?;
        let maps = maps.list(&ListParams::default()).await.ok()?;
        let by_name: std::collections::HashMap<String, &ConfigMap> = maps
            .items
            .iter()
            .filter_map(|m| Some((m.metadata.name.clone()?, m)))
            .collect();
        let done = crs
            .items
            .iter()
            .filter(|cr| {
                let name = cr.metadata.name.as_deref().unwrap_or_default();
                let map = by_name.get(&format!("{name}-c"));
                let value_ok = map.and_then(|m| m.data.as_ref()?.get("value")).map(String::as_str) == Some(value);
                value_ok && cr.data["status"]["observedGeneration"].as_i64() == cr.metadata.generation
            })
            .count();
        let children = maps
            .items
            .iter()
            .filter(|m| m.metadata.name.as_deref().is_some_and(|n| n.ends_with("-c")))
            .count();
        Some((crs.items.len(), done, children))
    }

    /// Waits until all `count` CRs converged on `value` with exactly one child each, then
    /// checks that the settled CRs cost no writes; returns how long convergence took.
    async fn converged(&self, count: usize, value: &str, within: Duration) -> Duration {
        let started = Instant::now();
        let last = std::sync::Mutex::new(None);
        let result = eventually(&format!("{count} CRs converged on {value:?}"), within, || async {
            let counts = self.converged_count(value).await;
            if counts.is_some() {
                *last.lock().unwrap() = counts;
            }
            (counts == Some((count, count, count))).then_some(())
        })
        .await;
        if let Err(error) = result {
            panic!("{error}: (CRs, converged, children) = {:?}", last.lock().unwrap());
        }
        let took = started.elapsed();
        // Retries queued during the fault, and a relist after it, run out first: each may
        // still clear a failure from a status. On a loaded machine that takes a while, so
        // wait for a quiet queue and a 3 s window without writes; a write loop never gets one.
        let writes = || self.handle.counters.writes.load(Ordering::Relaxed);
        eventually("the runtime to settle", within, || async {
            let queue = &self.handle.queue;
            let before = writes();
            tokio::time::sleep(Duration::from_secs(3)).await;
            (queue.depth() == 0 && queue.running() == 0 && writes() == before).then_some(())
        })
        .await
        .unwrap();
        // Settled, it stays so.
        let before = writes();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(writes(), before, "settled CRs cost writes");
        took
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
        }
        self.plane.stop();
    }
}

// The control plane's processes die with the thread that started them: a worker of this
// runtime, which lives as long as the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_killed_mid_convergence_of_1000_crs_loses_nothing() {
    let mut fault = Fault::new("kill-apiserver", false).await;
    let started = Instant::now();
    fault.create(1000, "one").await;
    // Kill it once a part has converged.
    eventually("a tenth converged", Duration::from_secs(120), || async {
        fault.converged_count("one").await.filter(|(_, done, _)| *done >= 100)
    })
    .await
    .unwrap();
    fault.plane.kill("kube-apiserver");
    let down = Duration::from_secs(3);
    tokio::time::sleep(down).await;
    fault.plane.restart("kube-apiserver").unwrap();
    let took = fault.converged(1000, "one", Duration::from_secs(300)).await;
    eprintln!(
        "fault kill -9 kube-apiserver (down {down:?}): 1000 CRs converged {took:?} after the restart ({:?} after the first CR was created)",
        started.elapsed()
    );
    fault.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_killed_and_restarted_mid_convergence_loses_nothing() {
    let mut fault = Fault::new("kill-etcd", false).await;
    fault.create(300, "one").await;
    eventually("some converged", Duration::from_secs(120), || async {
        fault.converged_count("one").await.filter(|(_, done, _)| *done >= 30)
    })
    .await
    .unwrap();
    fault.plane.kill("etcd");
    tokio::time::sleep(Duration::from_secs(3)).await;
    fault.plane.restart("etcd").unwrap();
    let took = fault.converged(300, "one", Duration::from_secs(300)).await;
    // And the runtime still follows changes.
    fault.update_all("two").await;
    let again = fault.converged(300, "two", Duration::from_secs(120)).await;
    eprintln!("fault kill -9 etcd: 300 CRs converged {took:?} after the restart; an update of all {again:?}");
    fault.stop().await;
}

/// The etcd revision now and a compaction to it, through etcd's JSON gateway.
async fn compact_etcd(port: u16) -> i64 {
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}/v3");
    let range: serde_json::Value = http
        .post(format!("{base}/kv/range"))
        .json(&json!({"key": "AA=="}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let revision: i64 = range["header"]["revision"].as_str().unwrap().parse().unwrap();
    let compacted = http
        .post(format!("{base}/kv/compaction"))
        .json(&json!({"revision": revision.to_string(), "physical": true}))
        .send()
        .await
        .unwrap();
    assert!(compacted.status().is_success(), "{:?}", compacted.text().await);
    revision
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_past_etcds_compaction_relists_and_misses_nothing() {
    let mut fault = Fault::new("watch-gone", true).await;
    fault.create(100, "one").await;
    fault.converged(100, "one", Duration::from_secs(120)).await;
    let lists = fault.handle.cache.lists();
    // Down goes the API server; meanwhile (through a fresh one) CRs change and etcd compacts
    // past everything the runtime's watch has seen: its resourceVersion is gone (410).
    fault.plane.kill("kube-apiserver");
    fault.plane.restart("kube-apiserver").unwrap();
    let changed = Instant::now();
    eventually("the API server back", Duration::from_secs(60), || async {
        fault.crs.list(&ListParams::default().limit(1)).await.ok()
    })
    .await
    .unwrap();
    fault.update_all("two").await;
    // Deleted while the watch may be away: the relist must notice.
    for i in 0..10 {
        let _ = fault.crs.delete(&format!("i{i}"), &Default::default()).await;
    }
    let revision = compact_etcd(fault.plane.etcd_port()).await;
    // A second restart drops the watch cache, so the runtime's rewatch starts below it.
    fault.plane.kill("kube-apiserver");
    fault.plane.restart("kube-apiserver").unwrap();
    let took = fault.converged(90, "two", Duration::from_secs(180)).await;
    assert!(
        fault.handle.cache.lists() > lists,
        "the watch relisted after the compaction to revision {revision}"
    );
    assert_eq!(fault.handle.cache.len(), 90, "the deleted CRs left the cache");
    eprintln!(
        "fault watch 410 (etcd compacted to revision {revision}): relisted {} time(s); 90 CRs converged {took:?} after the restart ({:?} after the changes)",
        fault.handle.cache.lists() - lists,
        changed.elapsed()
    );
    fault.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_competing_writer_causes_conflicts_and_the_runtime_still_converges() {
    let fault = Fault::new("competing", false).await;
    fault.create(50, "one").await;
    fault.converged(50, "one", Duration::from_secs(120)).await;
    let maps: Api<ConfigMap> = Api::namespaced(fault.client.clone(), &fault.ns);
    let results = &fault.handle.counters.results;
    let (errors_before, stale_before) = (
        results.error.load(Ordering::Relaxed),
        results.requeue.load(Ordering::Relaxed),
    );
    // For ten seconds another writer changes every child behind the runtime's back and
    // updates the CRs' status with stale resourceVersions.
    let conflicts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer = {
        let (maps, crs, conflicts) = (maps.clone(), fault.crs.clone(), conflicts.clone());
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut round = 0u32;
            while Instant::now() < deadline {
                round += 1;
                for i in 0..50 {
                    let patch = json!({"data": {"value": format!("theirs-{round}")}});
                    let _ = maps
                        .patch(&format!("i{i}-c"), &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                    let Ok(mut cr) = crs.get_status(&format!("i{i}")).await else {
                        continue;
                    };
                    cr.data["status"]["observedGeneration"] = json!(0);
                    // A stale version half of the time: the API server answers 409.
                    if round.is_multiple_of(2) {
                        cr.metadata.resource_version = Some("1".into());
                    }
                    if let Err(kube::Error::Api(status)) =
                        crs.replace_status(&format!("i{i}"), &PostParams::default(), &cr).await
                        && status.code == 409
                    {
                        conflicts.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    };
    // Meanwhile the CRs change too: the runtime's writes race the other writer's.
    fault.update_all("two").await;
    writer.await.unwrap();
    let stopped = Instant::now();
    // Drift is corrected at the next resync or event: nudge every CR as a watch event would.
    fault.update_all("three").await;
    let took = fault.converged(50, "three", Duration::from_secs(120)).await;
    assert!(conflicts.load(Ordering::Relaxed) > 0, "the other writer met conflicts");
    eprintln!(
        "fault competing writer: {} conflicts answered to it; the runtime: {} failed reconciles, {} stale writes retried; 50 CRs converged {took:?} after it stopped ({:?})",
        conflicts.load(Ordering::Relaxed),
        results.error.load(Ordering::Relaxed) - errors_before,
        results.requeue.load(Ordering::Relaxed) - stale_before,
        stopped.elapsed()
    );
    fault.stop().await;
}

/// The runtime's client configuration, pointed at `port` on loopback (the proxy).
fn through(plane: &ControlPlane, port: u16) -> kube::Config {
    let kubeconfig = kube::config::Kubeconfig::read_from(plane.kubeconfig()).unwrap();
    let mut config = futures::executor::block_on(kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    ))
    .unwrap();
    config.cluster_url = format!("https://127.0.0.1:{port}").parse().unwrap();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_api_server_that_drops_connections_for_a_minute_delays_but_loses_nothing() {
    let (plane, dir, client, katalog) = Fault::start("slow", false).await;
    let upstream = plane.server().trim_start_matches("https://").to_string();
    let proxy = orkestra_test_support::proxy::SlowProxy::start(upstream).await;
    let runtime_client = kube::Client::try_from(through(&plane, proxy.port)).unwrap();
    let fault = Fault::with_runtime_client(plane, dir, client, &katalog, runtime_client);
    fault.wait_started().await;
    fault.create(200, "one").await;
    // A minute of 100-300 ms per chunk, every connection cut every 7 s.
    let slow = Instant::now();
    let mut round = 0u64;
    while slow.elapsed() < Duration::from_secs(60) {
        round += 1;
        proxy.set_latency(Duration::from_millis(100 + (round * 37) % 200));
        if round.is_multiple_of(7) {
            proxy.cut();
        }
        if round == 20 {
            fault.update_all("two").await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let during = fault.converged_count("two").await;
    proxy.set_latency(Duration::ZERO);
    let healed = Instant::now();
    let took = fault.converged(200, "two", Duration::from_secs(180)).await;
    eprintln!(
        "fault slow API server (100-300 ms per chunk, cut every 7 s, for 60 s; {} connections): (CRs, converged, children) at the end of the minute {during:?}; all 200 converged {took:?} after it healed ({:?})",
        proxy.connections(),
        healed.elapsed()
    );
    fault.stop().await;
}
