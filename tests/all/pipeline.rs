//! The runtime pipeline against the real API server: event awareness and coalescing,
//! gates, the queue limit, watches, Events, dependencies and panic isolation.
//!
//! Each test installs its own CRDs (a unique group), watches only its own namespace, and
//! records what reach its reconcilers.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra::outcome::failure::{Reason, ReconcileError};
use orkestra::outcome::health::State;
use orkestra::pipeline::mux::{Action, Form, MuxReconciler, Reconciled, Reconciler, Request};
use orkestra::runtime::{CrdHandle, Runtime};
use orkestra_expr::sentinel;
use orkestra_test_support::requests::{Tally, counting_client};
use orkestra_test_support::{TestNamespace, eventually, namespace};
use serde_json::{Value, json};

pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// One reconcile as the recorder saw it.
#[derive(Debug, Clone)]
struct Call {
    key: String,
    sentinels: Vec<&'static str>,
    event_id: Option<u64>,
}

/// A constructor-form reconciler that records every call; it panics for keys ending in
/// `panic_on`, and `delay` slows every call.
#[derive(Default)]
pub(crate) struct Recorder {
    calls: Mutex<Vec<Call>>,
    /// Calls that ran to their end.
    finished: std::sync::atomic::AtomicUsize,
    panic_on: Option<String>,
    delay: Duration,
    /// The first this-many calls fail.
    fail_first: usize,
    /// Calls running now, and the most that ever ran at once.
    running: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
    /// The same by namespace: (running now, most at once).
    by_namespace: Mutex<std::collections::HashMap<String, (usize, usize)>>,
}

impl Recorder {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn count(&self, key: &str) -> usize {
        self.calls().iter().filter(|c| c.key == key).count()
    }

    /// The most calls of `namespace` that ran at once.
    fn peak_of(&self, namespace: &str) -> usize {
        self.by_namespace.lock().unwrap().get(namespace).map_or(0, |c| c.1)
    }

    /// Counts a call of `key` in its namespace as it starts, or its end.
    fn count_in_namespace(&self, key: &str, starts: bool) {
        let namespace = key.split_once('/').map_or("", |(n, _)| n).to_string();
        let mut by_namespace = self.by_namespace.lock().unwrap();
        let (running, peak) = by_namespace.entry(namespace).or_default();
        match starts {
            true => {
                *running += 1;
                *peak = (*peak).max(*running);
            }
            false => *running -= 1,
        }
    }
}

impl Reconciler for Recorder {
    fn form(&self) -> Form {
        Form::Constructor
    }

    fn reconcile<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Reconciled, ReconcileError>> {
        Box::pin(async move {
            let sentinels = sentinel::NAMES
                .iter()
                .enumerate()
                .filter(|(i, _)| request.sentinels.is_set(*i))
                .map(|(_, n)| *n)
                .collect();
            self.calls.lock().unwrap().push(Call {
                key: request.key.clone(),
                sentinels,
                event_id: request.event_id,
            });
            if self
                .panic_on
                .as_deref()
                .is_some_and(|suffix| request.key.ends_with(suffix))
            {
                panic!("the reconciler of {} exploded", request.key);
            }
            let running = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(running, Ordering::SeqCst);
            self.count_in_namespace(&request.key, true);
            tokio::time::sleep(self.delay).await;
            self.count_in_namespace(&request.key, false);
            self.running.fetch_sub(1, Ordering::SeqCst);
            self.finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.calls.lock().unwrap().len() <= self.fail_first {
                return Err(ReconcileError::new(Reason::component("Flaky"), "not yet"));
            }
            Ok(Action::Done.into())
        })
    }
}

/// A running runtime for one test.
pub(crate) struct Harness {
    pub(crate) ns: TestNamespace,
    pub(crate) group: String,
    runtime_crds: Vec<CrdHandle>,
    pub(crate) health: orkestra::outcome::health::HealthBoard,
    /// What its Live API serves.
    pub(crate) inspect: orkestra::live::Inspect,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Harness {
    /// Loads `crds` (the YAML under `spec.crds`, with `GROUP` and `NS` substituted),
    /// installs the CRDs, registers the recorders and starts the runtime.
    pub(crate) async fn start(prefix: &str, crds: &str, recorders: &[(&str, Arc<Recorder>)], install: bool) -> Self {
        Self::start_with(prefix, "", crds, recorders, install).await
    }

    /// [`Harness::start`] with top-level Katalog sections (`profiles:`, ...) before `spec`.
    pub(crate) async fn start_with(
        prefix: &str,
        sections: &str,
        crds: &str,
        recorders: &[(&str, Arc<Recorder>)],
        install: bool,
    ) -> Self {
        let ns = namespace(prefix).await.unwrap();
        Self::launch(ns, prefix, sections, crds, recorders, install, None).await
    }

    /// [`Harness::start`] (CRDs installed, no recorders) with a runtime whose every request
    /// is in the tally returned.
    pub(crate) async fn start_counted(prefix: &str, crds: &str) -> (Self, Arc<Tally>) {
        let (client, tally) = counting_client().await.unwrap();
        let ns = namespace(prefix).await.unwrap();
        (Self::launch(ns, prefix, "", crds, &[], true, Some(client)).await, tally)
    }

    /// Stops the runtime and starts it again over the same namespace and CRs (as after an
    /// upgrade; `prefix` and `crds` as it was started with), on a client whose every request
    /// is in the tally returned.
    pub(crate) async fn restart_counted(mut self, prefix: &str, crds: &str) -> (Self, Arc<Tally>) {
        self.halt().await;
        let (client, tally) = counting_client().await.unwrap();
        (
            Self::launch(self.ns, prefix, "", crds, &[], false, Some(client)).await,
            tally,
        )
    }

    async fn launch(
        ns: TestNamespace,
        prefix: &str,
        sections: &str,
        crds: &str,
        recorders: &[(&str, Arc<Recorder>)],
        install: bool,
        runtime_client: Option<kube::Client>,
    ) -> Self {
        let group = format!("{}.pipeline.orkestra.io", ns.name);
        let text = format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {{name: {prefix}}}\n{sections}spec:\n  crds:\n{}",
            crds.replace("GROUP", &group).replace("NS", &ns.name)
        );
        let katalog = orkestra_katalog::load_sources(&[("katalog.yaml".into(), text)]).unwrap();
        if install {
            orkestra_kube::crd_install::install_crds(&ns.client, &katalog.katalog, WAIT)
                .await
                .unwrap();
        }
        // The event log too: the Live API tests read it.
        let runtime_client = runtime_client.unwrap_or_else(|| ns.client.clone());
        let mut runtime = Runtime::new(runtime_client, &katalog).unwrap().with_event_log();
        for (crd, recorder) in recorders {
            runtime = runtime
                .with_reconciler(crd, MuxReconciler::new(recorder.clone()))
                .unwrap();
        }
        let runtime_crds: Vec<CrdHandle> = katalog.crds.keys().filter_map(|n| runtime.crd(n)).collect();
        let health = runtime.health();
        let inspect = runtime.inspect();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(runtime.run(async {
            let _ = stopped.await;
        }));
        Self {
            ns,
            group,
            runtime_crds,
            health,
            inspect,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub(crate) fn api(&self, kind: &str) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(&self.group, "v1", kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
        Api::namespaced_with(self.ns.client.clone(), &self.ns.name, &resource)
    }

    /// [`Harness::api`] in another namespace (for a CRD that watches them all).
    pub(crate) fn api_in(&self, kind: &str, namespace: &str) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(&self.group, "v1", kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
        Api::namespaced_with(self.ns.client.clone(), namespace, &resource)
    }

    pub(crate) async fn create(&self, kind: &str, name: &str, spec: Value) {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/v1", self.group), "kind": kind, "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap();
        self.api(kind).create(&PostParams::default(), &object).await.unwrap();
    }

    pub(crate) async fn patch(&self, kind: &str, name: &str, patch: Value) {
        self.api(kind)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    pub(crate) fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.ns.name)
    }

    pub(crate) fn handle(&self, crd: &str) -> &CrdHandle {
        self.runtime_crds.iter().find(|h| &*h.crd.name == crd).unwrap()
    }

    pub(crate) async fn wait_state(&self, crd: &str, state: State) {
        eventually(&format!("{crd} to be {state:?}"), WAIT, || async {
            (self.health.get(crd).map(|h| h.state) == Some(state)).then_some(())
        })
        .await
        .unwrap();
    }

    /// Waits for `crd`'s CRs to settle, then asserts that resyncs (the CRD's `resync` must be
    /// about a second) run and write nothing.
    pub(crate) async fn writes_nothing_once_settled(&self, crd: &str) {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let counters = &self.handle(crd).counters;
        let (writes, reconciles) = (
            counters.writes.load(Ordering::Relaxed),
            counters.reconciles.load(Ordering::Relaxed),
        );
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(
            counters.reconciles.load(Ordering::Relaxed) >= reconciles + 3,
            "resyncs ran"
        );
        assert_eq!(
            counters.writes.load(Ordering::Relaxed),
            writes,
            "no write in a steady state"
        );
    }

    pub(crate) async fn stop(mut self) {
        self.halt().await;
    }

    /// Stops the runtime, gracefully.
    async fn halt(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(WAIT, task).await.expect("graceful stop").unwrap();
        }
    }
}

pub(crate) fn crd(name: &str, kind: &str, operator_box: &str) -> String {
    format!(
        "    {name}:\n      apiTypes: {{group: GROUP, version: v1, kind: {kind}}}\n      namespace: NS\n      operatorBox:\n{operator_box}"
    )
}

async fn wait_calls(recorder: &Recorder, key: &str, at_least: usize) {
    eventually(&format!("{at_least} reconcile(s) of {key}"), WAIT, || async {
        (recorder.count(key) >= at_least).then_some(())
    })
    .await
    .unwrap();
}

/// Lets in-flight events settle: nothing new may arrive for a while.
async fn settle(recorder: &Recorder) {
    let mut last = usize::MAX;
    loop {
        let now = recorder.calls().len();
        if now == last {
            return;
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
}

#[tokio::test]
async fn event_aware_keeps_each_update_with_its_own_sentinels_and_default_coalesces() {
    let aware = Arc::new(Recorder {
        delay: Duration::from_millis(600),
        ..Recorder::default()
    });
    let plain = Arc::new(Recorder {
        delay: Duration::from_millis(600),
        ..Recorder::default()
    });
    let gate = |event_aware: bool| {
        format!(
            "        preReconcile:\n          sentinels: [generationChanged, labelsChanged]\n          reconcileGate:\n            eventAware: {event_aware}\n"
        )
    };
    let crds = crd("aware", "Aware", &gate(true)) + &crd("plain", "Plain", &gate(false));
    let h = Harness::start(
        "event-aware",
        &crds,
        &[("aware", aware.clone()), ("plain", plain.clone())],
        true,
    )
    .await;
    for kind in ["Aware", "Plain"] {
        h.create(kind, "a", json!({"v": 0})).await;
    }
    wait_calls(&aware, &h.key("a"), 1).await;
    wait_calls(&plain, &h.key("a"), 1).await;
    settle(&aware).await;
    settle(&plain).await;
    let (aware_before, plain_before) = (aware.count(&h.key("a")), plain.count(&h.key("a")));

    // While the first run is still going, two quick updates: a spec edit, then a label edit.
    for (kind, recorder) in [("Aware", &aware), ("Plain", &plain)] {
        h.patch(kind, "a", json!({"spec": {"v": 1}})).await;
        wait_calls(
            recorder,
            &h.key("a"),
            if kind == "Aware" {
                aware_before + 1
            } else {
                plain_before + 1
            },
        )
        .await;
        h.patch(kind, "a", json!({"spec": {"v": 2}})).await;
        h.patch(kind, "a", json!({"metadata": {"labels": {"x": "y"}}})).await;
    }
    settle(&aware).await;
    settle(&plain).await;

    let aware_calls: Vec<Call> = aware.calls().into_iter().skip(aware_before).collect();
    assert_eq!(
        aware_calls.len(),
        3,
        "eventAware: every update is its own run: {aware_calls:?}"
    );
    assert!(aware_calls.iter().all(|c| c.event_id.is_some()));
    assert_eq!(aware_calls[1].sentinels, ["generationChanged"], "{aware_calls:?}");
    assert_eq!(
        aware_calls[2].sentinels,
        ["labelsChanged"],
        "its own sentinels, not merged: {aware_calls:?}"
    );

    let plain_calls: Vec<Call> = plain.calls().into_iter().skip(plain_before).collect();
    assert_eq!(
        plain_calls.len(),
        2,
        "coalesced: the two updates behind the running one make one run: {plain_calls:?}"
    );
    assert!(plain_calls.iter().all(|c| c.event_id.is_none()));
    assert_eq!(
        plain_calls[1].sentinels,
        ["generationChanged", "labelsChanged"],
        "coalesced sentinels merge"
    );
    h.stop().await;
}

#[tokio::test]
async fn an_enqueue_gate_on_generation_changed_ignores_label_edits_and_passes_spec_edits() {
    let recorder = Arc::new(Recorder::default());
    let operator_box = "        preReconcile:\n          sentinels: [generationChanged]\n          enqueueGate:\n            sentinels: [generationChanged]\n";
    let h = Harness::start(
        "enqueue-gate",
        &crd("web", "Web", operator_box),
        &[("web", recorder.clone())],
        true,
    )
    .await;
    h.create("Web", "a", json!({"v": 0})).await;
    // A create changes the generation from nothing: it passes.
    wait_calls(&recorder, &h.key("a"), 1).await;
    assert_eq!(recorder.calls()[0].sentinels, ["generationChanged"]);
    settle(&recorder).await;
    let after_create = recorder.count(&h.key("a"));

    h.patch("Web", "a", json!({"metadata": {"labels": {"team": "ops"}}}))
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        recorder.count(&h.key("a")),
        after_create,
        "a label-only edit never reaches the queue"
    );
    let dropped = h.handle("web").stats.snapshot()["dropped"]["enqueueGate"]
        .as_u64()
        .unwrap();
    assert!(dropped >= 1, "drops are counted: {dropped}");

    h.patch("Web", "a", json!({"spec": {"v": 1}})).await;
    wait_calls(&recorder, &h.key("a"), after_create + 1).await;
    assert_eq!(recorder.calls()[after_create].sentinels, ["generationChanged"]);
    h.stop().await;
}

#[tokio::test]
async fn a_queue_at_max_depth_with_drop_never_exceeds_it_and_resync_reconciles_everything() {
    let recorder = Arc::new(Recorder {
        delay: Duration::from_millis(150),
        ..Recorder::default()
    });
    let operator_box = "        reconcile:\n          workers: 1\n          resync: 2s\n          queue:\n            maxDepth: 3\n            behaviour:\n              onLimit: {drop: true}\n";
    let h = Harness::start(
        "max-depth",
        &crd("web", "Web", operator_box),
        &[("web", recorder.clone())],
        true,
    )
    .await;
    let handle = h.handle("web").clone();
    let max_seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let probe = tokio::spawn({
        let (queue, max_seen) = (handle.queue.clone(), max_seen.clone());
        async move {
            loop {
                max_seen.fetch_max(queue.depth(), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    for i in 0..12 {
        h.create("Web", &format!("cr-{i}"), json!({})).await;
    }
    for i in 0..12 {
        wait_calls(&recorder, &h.key(&format!("cr-{i}")), 1).await;
    }
    probe.abort();
    assert!(
        max_seen.load(std::sync::atomic::Ordering::Relaxed) <= 3,
        "depth stayed within maxDepth"
    );
    let limit_drops = handle.stats.snapshot()["dropped"]["limit"].as_u64().unwrap();
    assert!(
        limit_drops > 0,
        "some triggers were dropped at the limit, and resync brought them back"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_reconcile_gate_marks_the_crd_gated_and_reopening_it_reconciles() {
    let recorder = Arc::new(Recorder::default());
    let operator_box = "        preReconcile:\n          reconcileGate:\n            when:\n              - {field: spec.paused, notEquals: 'true'}\n";
    let h = Harness::start(
        "reconcile-gate",
        &crd("web", "Web", operator_box),
        &[("web", recorder.clone())],
        true,
    )
    .await;
    h.create("Web", "a", json!({"paused": true})).await;
    h.wait_state("web", State::Gated).await;
    assert_eq!(
        recorder.count(&h.key("a")),
        0,
        "nothing reaches the reconciler while gated"
    );
    h.patch("Web", "a", json!({"spec": {"paused": false}})).await;
    wait_calls(&recorder, &h.key("a"), 1).await;
    h.wait_state("web", State::Healthy).await;
    h.stop().await;
}

#[tokio::test]
async fn a_config_map_watch_enqueues_the_keyed_cr_only_for_declared_event_types() {
    let recorder = Arc::new(Recorder::default());
    let operator_box = "        observe:\n          watch:\n            - apiVersion: v1\n              kind: ConfigMap\n              namespace: NS\n              on: [update]\n              keyFrom: {label: site}\n";
    let h = Harness::start(
        "cm-watch",
        &crd("site", "Site", operator_box),
        &[("site", recorder.clone())],
        true,
    )
    .await;
    h.create("Site", "blog", json!({})).await;
    h.create("Site", "shop", json!({})).await;
    wait_calls(&recorder, &h.key("blog"), 1).await;
    wait_calls(&recorder, &h.key("shop"), 1).await;
    settle(&recorder).await;
    let before = (recorder.count(&h.key("blog")), recorder.count(&h.key("shop")));

    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "blog-settings", "labels": {"site": "blog"}}, "data": {"theme": "dark"}}),
    )
    .unwrap();
    configmaps.create(&PostParams::default(), &cm).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        recorder.count(&h.key("blog")),
        before.0,
        "a create is not a declared event type"
    );

    configmaps
        .patch(
            "blog-settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"theme": "light"}})),
        )
        .await
        .unwrap();
    wait_calls(&recorder, &h.key("blog"), before.0 + 1).await;
    settle(&recorder).await;
    assert_eq!(
        recorder.count(&h.key("shop")),
        before.1,
        "only the keyed CR is enqueued"
    );
    h.stop().await;
}

#[tokio::test]
async fn an_event_with_a_matching_reason_enqueues_the_keyed_cr_and_its_fields_reach_the_gate() {
    let recorder = Arc::new(Recorder::default());
    let operator_box = "        observe:\n          events:\n            dbReady:\n              reason: DatabaseReady\n              keyFrom: {name: app}\n              enqueueGate:\n                when:\n                  - {field: '{{ .events.dbReady.reportingController }}', equals: db.example.io/controller}\n";
    let h = Harness::start(
        "events",
        &crd("app", "App", operator_box),
        &[("app", recorder.clone())],
        true,
    )
    .await;
    h.create("App", "app", json!({})).await;
    wait_calls(&recorder, &h.key("app"), 1).await;
    settle(&recorder).await;
    let before = recorder.count(&h.key("app"));

    let events_api: Api<DynamicObject> = Api::namespaced_with(
        h.ns.client.clone(),
        &h.ns.name,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("events.k8s.io", "v1", "Event"), "events"),
    );
    let event = |name: &str, reason: &str, controller: &str| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reason": reason, "action": "Ready", "type": "Normal", "note": "the database is up",
            "reportingController": controller, "reportingInstance": "db-0",
            "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "db-0", "namespace": h.ns.name},
        }))
        .unwrap()
    };
    // Wrong reason: no trigger. Right reason, wrong controller: the gate drops it.
    events_api
        .create(
            &PostParams::default(),
            &event("e1", "DatabaseDown", "db.example.io/controller"),
        )
        .await
        .unwrap();
    events_api
        .create(&PostParams::default(), &event("e2", "DatabaseReady", "someone-else"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(recorder.count(&h.key("app")), before);
    events_api
        .create(
            &PostParams::default(),
            &event("e3", "DatabaseReady", "db.example.io/controller"),
        )
        .await
        .unwrap();
    wait_calls(&recorder, &h.key("app"), before + 1).await;
    h.stop().await;
}

#[tokio::test]
async fn templated_event_matches_reach_only_the_crs_they_name() {
    // The seed's own example: an App waits for the Database its spec names.
    let recorder = Arc::new(Recorder::default());
    let operator_box = "        observe:
          events:
            dbReady:
              reason: DatabaseReady
              regarding: {kind: Database, name: '{{ .spec.databaseRef }}'}
            keyed:
              reason: Keyed
              keyFrom: {name: '{{ .regarding.name }}'}
";
    let h = Harness::start(
        "event-templates",
        &crd("app", "App", operator_box),
        &[("app", recorder.clone())],
        true,
    )
    .await;
    for (name, db) in [("shop", "orders"), ("blog", "posts")] {
        h.create("App", name, json!({"databaseRef": db})).await;
        wait_calls(&recorder, &h.key(name), 1).await;
    }
    settle(&recorder).await;
    let count = |name: &str| recorder.count(&h.key(name));
    let before = (count("shop"), count("blog"));

    let events_api: Api<DynamicObject> = Api::namespaced_with(
        h.ns.client.clone(),
        &h.ns.name,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("events.k8s.io", "v1", "Event"), "events"),
    );
    let ns = h.ns.name.clone();
    let event = |name: &str, reason: &str, regarding: &str| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reason": reason, "action": "Ready", "type": "Normal",
            "reportingController": "db.example.io/controller", "reportingInstance": "db-0",
            "regarding": {"apiVersion": "db.example.io/v1", "kind": "Database", "name": regarding, "namespace": ns},
        }))
        .unwrap()
    };
    let post = |e: DynamicObject| {
        let api = events_api.clone();
        async move { api.create(&PostParams::default(), &e).await.unwrap() }
    };
    // A database nobody names: no trigger at all.
    post(event("e1", "DatabaseReady", "inventory")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!((count("shop"), count("blog")), before, "nobody's database");
    // The shop's database: the shop, and only the shop.
    post(event("e2", "DatabaseReady", "orders")).await;
    wait_calls(&recorder, &h.key("shop"), before.0 + 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(count("blog"), before.1, "the blog's database is another");
    // keyFrom.name rendered over the Event: `blog` from regarding.name `blog`.
    let shop_now = count("shop");
    post(event("e3", "Keyed", "blog")).await;
    wait_calls(&recorder, &h.key("blog"), before.1 + 1).await;
    assert_eq!(count("shop"), shop_now, "keyed to the blog only");
    h.stop().await;
}

#[tokio::test]
async fn a_serve_targets_own_watch_runs_and_triggers_only_the_crs_of_that_target() {
    let recorder = Arc::new(Recorder::default());
    let watch = |label: &str, indent: usize| {
        let pad = " ".repeat(indent);
        format!(
            "{pad}observe:\n{pad}  watch:\n{pad}    - {{apiVersion: v1, kind: ConfigMap, namespace: NS, keyFrom: {{label: {label}}}}}\n"
        )
    };
    let crds = crd("app", "App", &watch("site", 8))
        + "      serve:\n        enabled: true\n        namespace: NS\n        target:\n          app: {primary: true}\n          v2:\n            operatorBox:\n"
        + &watch("v2site", 14);
    let h = Harness::start("target-watch", &crds, &[("app", recorder.clone())], true).await;
    h.create("App", "plain", json!({})).await;
    let mut v2: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", h.group), "kind": "App",
        "metadata": {"name": "new", "annotations": {"orkestra.orkspace.io/serve-target": "v2"}},
        "spec": {},
    }))
    .unwrap();
    v2.metadata.namespace = Some(h.ns.name.clone());
    h.api("App").create(&PostParams::default(), &v2).await.unwrap();
    for name in ["plain", "new"] {
        wait_calls(&recorder, &h.key(name), 1).await;
    }
    settle(&recorder).await;
    let count = |name: &str| recorder.count(&h.key(name));
    let before = (count("plain"), count("new"));

    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let create = |name: &str, label: &str, value: &str| {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {label: value}}})).unwrap();
        let api = configmaps.clone();
        async move { api.create(&PostParams::default(), &cm).await.unwrap() }
    };
    // The target's watch: started, and it reaches its CR.
    create("for-new", "v2site", "new").await;
    wait_calls(&recorder, &h.key("new"), before.1 + 1).await;
    // The CRD's watch reaches the CRD-level CR, not the target's (its box replaced observe).
    create("for-plain", "site", "plain").await;
    wait_calls(&recorder, &h.key("plain"), before.0 + 1).await;
    let new_now = count("new");
    create("crd-level-for-new", "site", "new").await;
    create("target-for-plain", "v2site", "plain").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        (count("new"), count("plain")),
        (new_now, before.0 + 1),
        "each watch triggers only the CRs whose box declares it"
    );
    h.stop().await;
}

#[tokio::test]
async fn depends_on_keeps_a_crd_pending_until_its_dependency_is_healthy() {
    let db = Arc::new(Recorder::default());
    let app = Arc::new(Recorder::default());
    let crds = crd("db", "Db", "        runtime: {}\n")
        + &crd("app", "App", "        runtime: {}\n").replace(
            "      namespace: NS\n",
            "      namespace: NS\n      dependsOn: {db: healthy}\n",
        );
    // Nothing installed yet: the Db CRD arrives later, and the runtime must start it then.
    let h = Harness::start("depends-on", &crds, &[("db", db.clone()), ("app", app.clone())], false).await;
    let katalog_text = format!(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n{}",
        crds.replace("GROUP", &h.group).replace("NS", &h.ns.name)
    );
    let katalog = orkestra_katalog::load_sources(&[("k.yaml".into(), katalog_text)])
        .unwrap()
        .katalog;
    let only = |name: &str| orkestra_katalog::Katalog {
        crds: katalog
            .crds
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect(),
        ..katalog.clone()
    };
    orkestra_kube::crd_install::install_crds(&h.ns.client, &only("app"), WAIT)
        .await
        .unwrap();
    h.create("App", "a", json!({})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.health.get("app").unwrap().state,
        State::Pending,
        "the dependency's CRD does not exist yet"
    );
    assert_eq!(h.health.get("db").unwrap().state, State::Pending);

    orkestra_kube::crd_install::install_crds(&h.ns.client, &only("db"), WAIT)
        .await
        .unwrap();
    h.wait_state("db", State::Started).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        h.health.get("app").unwrap().state,
        State::Pending,
        "started is not healthy"
    );
    assert_eq!(app.count(&h.key("a")), 0);

    h.create("Db", "main", json!({})).await;
    h.wait_state("db", State::Healthy).await;
    wait_calls(&app, &h.key("a"), 1).await;
    h.stop().await;
}

#[tokio::test]
async fn a_panicking_reconciler_fails_only_its_own_item_and_another_crd_keeps_going() {
    let bad = Arc::new(Recorder {
        panic_on: Some("/boom".into()),
        ..Recorder::default()
    });
    let good = Arc::new(Recorder::default());
    let crds = crd("bad", "Bad", "        runtime: {}\n") + &crd("good", "Good", "        runtime: {}\n");
    let h = Harness::start("panic", &crds, &[("bad", bad.clone()), ("good", good.clone())], true).await;
    h.create("Bad", "boom", json!({})).await;
    h.create("Bad", "calm", json!({})).await;
    for i in 0..5 {
        h.create("Good", &format!("g{i}"), json!({})).await;
    }
    // The panicking item is retried with backoff; its neighbour and the other CRD are fine.
    wait_calls(&bad, &h.key("boom"), 3).await;
    wait_calls(&bad, &h.key("calm"), 1).await;
    for i in 0..5 {
        wait_calls(&good, &h.key(&format!("g{i}")), 1).await;
    }
    h.wait_state("good", State::Healthy).await;
    let counters = &h.handle("bad").counters;
    assert!(counters.panics.load(std::sync::atomic::Ordering::Relaxed) >= 3);
    let health = h.health.get("bad").unwrap();
    assert!(
        health
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("panic: the reconciler of") && e.contains("exploded")),
        "{health:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_change_to_an_owned_child_re_enqueues_its_parent() {
    let recorder = Arc::new(Recorder::default());
    // Templates that manage ConfigMaps make the runtime watch ConfigMaps for their owners.
    let operator_box =
        "        reconcile:\n          onReconcile:\n            configMaps:\n              - data: {a: b}\n";
    let h = Harness::start(
        "owned",
        &crd("web", "Web", operator_box),
        &[("web", recorder.clone())],
        true,
    )
    .await;
    h.create("Web", "a", json!({})).await;
    wait_calls(&recorder, &h.key("a"), 1).await;
    settle(&recorder).await;
    let before = recorder.count(&h.key("a"));
    let uid = h.api("Web").get("a").await.unwrap().metadata.uid.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    // Labelled as the runtime labels what it makes: its watch of owned kinds selects those.
    let kind = orkestra_katalog::ownership::kind_label("Web", &h.group);
    let owned: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "child",
        "labels": {orkestra_expr::labels::OWNER_KIND_LABEL: kind},
        "ownerReferences": [{"apiVersion": format!("{}/v1", h.group), "kind": "Web", "name": "a", "uid": uid}]}}))
    .unwrap();
    let stranger: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "stranger"}})).unwrap();
    configmaps.create(&PostParams::default(), &stranger).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        recorder.count(&h.key("a")),
        before,
        "a ConfigMap it does not own changes nothing"
    );
    configmaps.create(&PostParams::default(), &owned).await.unwrap();
    wait_calls(&recorder, &h.key("a"), before + 1).await;
    h.stop().await;
}

#[tokio::test]
async fn a_built_in_kind_is_a_primary_when_given_a_label_selector() {
    let recorder = Arc::new(Recorder::default());
    let crds = "    settings:\n      apiTypes: {kind: ConfigMap, version: v1}\n      namespace: NS\n      labelSelector: {role: settings}\n";
    let h = Harness::start("builtin", crds, &[("settings", recorder.clone())], true).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    for (name, role) in [("mine", "settings"), ("other", "cache")] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"role": role}}})).unwrap();
        configmaps.create(&PostParams::default(), &cm).await.unwrap();
    }
    wait_calls(&recorder, &h.key("mine"), 1).await;
    settle(&recorder).await;
    assert_eq!(recorder.count(&h.key("other")), 0, "outside the label selector");
    h.stop().await;
}

#[tokio::test]
async fn retry_backoff_retries_in_place_and_requeue_after_schedules_the_next_run() {
    let flaky = Arc::new(Recorder {
        fail_first: 2,
        ..Recorder::default()
    });
    let periodic = Arc::new(Recorder::default());
    let crds = crd(
        "flaky",
        "Flaky",
        "        reconcile:\n          queue:\n            retryBackoff: {initial: 100ms, maxAttempts: 2}\n",
    ) + &crd(
        "periodic",
        "Periodic",
        "        reconcile:\n          requeue:\n            after: '{{ .spec.every }}'\n",
    );
    let h = Harness::start(
        "retry",
        &crds,
        &[("flaky", flaky.clone()), ("periodic", periodic.clone())],
        true,
    )
    .await;
    h.create("Flaky", "a", json!({})).await;
    h.create("Periodic", "p", json!({"every": "1s"})).await;
    wait_calls(&flaky, &h.key("a"), 3).await;
    h.wait_state("flaky", State::Healthy).await;
    let health = h.health.get("flaky").unwrap();
    assert_eq!(
        (health.failed_reconciles, health.consecutive_fails),
        (0, 0),
        "in-place retries hide the two failures"
    );
    let started = std::time::Instant::now();
    wait_calls(&periodic, &h.key("p"), 4).await;
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "requeued about every second"
    );
    h.stop().await;
}

#[tokio::test]
async fn shutdown_stops_intake_and_lets_in_flight_reconciles_finish() {
    let slow = Arc::new(Recorder {
        delay: Duration::from_secs(2),
        ..Recorder::default()
    });
    let h = Harness::start(
        "shutdown",
        &crd("web", "Web", "        runtime: {}\n"),
        &[("web", slow.clone())],
        true,
    )
    .await;
    h.create("Web", "a", json!({})).await;
    wait_calls(&slow, &h.key("a"), 1).await;
    let queue = h.handle("web").queue.clone();
    let started = std::time::Instant::now();
    h.stop().await;
    assert_eq!(
        slow.finished.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the running reconcile finished before the runtime returned"
    );
    assert!(started.elapsed() >= Duration::from_millis(1500), "stop waited for it");
    assert!(queue.is_closed(), "intake is closed");
}

#[tokio::test]
async fn autoscale_adds_workers_while_the_queue_is_deep_and_restores_them_after_the_cooldown() {
    let recorder = Arc::new(Recorder {
        delay: Duration::from_millis(400),
        ..Recorder::default()
    });
    let operator_box = "        reconcile: {workers: 1, resync: 60s}
        runtime:
          autoscale:
            interval: 200ms
            cooldown: 1s
            conditions:
              when:
                - field: metrics.queueDepth
                  greaterThan: 2
            do: {workers: 4, resync: 45s}
";
    let harness = Harness::start(
        "autoscale",
        &crd("ingest", "Ingest", operator_box),
        &[("ingest", recorder.clone())],
        true,
    )
    .await;
    harness.wait_state("ingest", State::Started).await;
    let tuning = harness.handle("ingest").tuning.clone();
    assert_eq!(
        (tuning.workers(), tuning.scaled()),
        (1, false),
        "configured values at start"
    );
    for i in 0..16 {
        harness.create("Ingest", &format!("item-{i}"), json!({})).await;
    }
    eventually("the autoscaler to scale", WAIT, || async {
        tuning.scaled().then_some(())
    })
    .await
    .unwrap();
    assert_eq!(tuning.workers(), 4);
    assert_eq!(
        *tuning.resync().borrow(),
        Duration::from_secs(45),
        "the resync override"
    );
    eventually("four reconciles at once", WAIT, || async {
        (recorder.peak.load(Ordering::SeqCst) == 4).then_some(())
    })
    .await
    .unwrap();
    // The queue drains, the condition stops holding, and after the cooldown the CRD runs
    // with its configured values again.
    eventually("the configured values to return", WAIT, || async {
        (!tuning.scaled()).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(tuning.workers(), 1);
    assert_eq!(*tuning.resync().borrow(), Duration::from_secs(60));
    assert!(
        recorder.peak.load(Ordering::SeqCst) <= 4,
        "never more than the autoscaler's workers"
    );
    for i in 0..16 {
        assert!(
            recorder.count(&harness.key(&format!("item-{i}"))) >= 1,
            "item-{i} reconciled"
        );
    }
    harness.stop().await;
}

#[tokio::test]
async fn a_quiet_namespace_is_served_while_a_noisy_ones_backlog_is_still_queued() {
    let recorder = Arc::new(Recorder {
        delay: Duration::from_millis(40),
        ..Recorder::default()
    });
    // All namespaces: the noisy one is the harness's, the quiet one another.
    let crds = "    app:\n      apiTypes: {group: GROUP, version: v1, kind: App}\n      operatorBox:\n        reconcile: {workers: 1, resync: 10m}\n";
    let h = Harness::start("noisy", crds, &[("app", recorder.clone())], true).await;
    let quiet = namespace("quiet").await.unwrap();
    const BACKLOG: usize = 200;
    for i in 0..BACKLOG {
        h.create("App", &format!("n{i}"), json!({})).await;
    }
    // One worker at 40 ms a reconcile: most of the backlog is still queued.
    let quiet_app = h.api_in("App", &quiet.name);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", h.group), "kind": "App", "metadata": {"name": "q"}, "spec": {},
    }))
    .unwrap();
    quiet_app.create(&PostParams::default(), &object).await.unwrap();
    let quiet_key = format!("{}/q", quiet.name);
    wait_calls(&recorder, &quiet_key, 1).await;
    let calls = recorder.calls();
    let at = calls.iter().position(|c| c.key == quiet_key).unwrap();
    let noisy_before = calls[..at].iter().filter(|c| c.key.starts_with(&h.ns.name)).count();
    assert!(
        noisy_before < BACKLOG / 2,
        "the quiet CR ran after {noisy_before} of the noisy namespace's {BACKLOG} reconciles"
    );
    h.stop().await;
}

/// Issue 37: a user's change goes before background work. A resync keeps the one worker
/// busy with a backlog; a CR created meanwhile runs next, not after the backlog.
#[tokio::test]
async fn a_new_cr_runs_before_the_resync_backlog_that_keeps_the_worker_busy() {
    let recorder = Arc::new(Recorder {
        delay: Duration::from_millis(60),
        ..Recorder::default()
    });
    let crds = crd("app", "App", "        reconcile: {workers: 1, resync: 2s}\n");
    let h = Harness::start("priority", &crds, &[("app", recorder.clone())], true).await;
    const CRS: usize = 60;
    for i in 0..CRS {
        h.create("App", &format!("r{i}"), json!({})).await;
    }
    // The creates ran, and resyncs have queued a backlog: at 60 ms a run, one round of 60
    // (3.6 s) takes longer than the 2 s over which a resync offers them.
    eventually("resyncs under way", WAIT, || async {
        (recorder.calls().len() >= CRS * 2).then_some(())
    })
    .await
    .unwrap();
    let before = recorder.calls().len();
    let queued = h.inspect.crds()[0].queue.depth();
    assert!(queued >= CRS / 2, "a backlog of resyncs is queued: {queued}");
    h.create("App", "fresh", json!({})).await;
    let key = format!("{}/fresh", h.ns.name);
    wait_calls(&recorder, &key, 1).await;
    let calls = recorder.calls();
    let at = calls.iter().position(|c| c.key == key).unwrap();
    assert!(
        at - before <= 3,
        "the new CR ran after {} of the {queued} queued resyncs",
        at - before
    );
    h.stop().await;
}

/// Issue 51: after a restart over settled CRs, the settled CRs' reconciles wait for their
/// children's list instead of reading each child on its own, while a CR created meanwhile
/// runs at once.
#[tokio::test]
async fn after_a_restart_the_settled_crs_wait_for_the_children_s_list_and_read_no_child_alone() {
    let crds = crd(
        "app",
        "App",
        "        reconcile:\n          onReconcile:\n            configMaps:\n              - {name: '{{ .metadata.name }}-cm', data: {x: '1'}}\n",
    );
    let h = Harness::start("settled", &crds, &[], true).await;
    const CRS: usize = 30;
    for i in 0..CRS {
        h.create("App", &format!("s{i}"), json!({})).await;
    }
    let ready = |h: &Harness, name: String| {
        let api = h.api("App");
        async move {
            let app = api.get(&name).await.ok()?;
            (app.data["status"]["conditions"][0]["status"] == "True").then_some(())
        }
    };
    for i in 0..CRS {
        eventually("Ready", WAIT, || ready(&h, format!("s{i}"))).await.unwrap();
    }
    let (h, tally) = h.restart_counted("settled", &crds).await;
    h.create("App", "fresh", json!({})).await;
    eventually("the new CR Ready", WAIT, || ready(&h, "fresh".into()))
        .await
        .unwrap();
    // Every settled CR reconciled again (the initial list's work)...
    let counters = &h.handle("app").counters;
    eventually("the settled CRs reconciled", WAIT, || async {
        (counters.reconciles.load(Ordering::Relaxed) > CRS as u64).then_some(())
    })
    .await
    .unwrap();
    // ...with its child read from the list, never on its own, and nothing written.
    let get = http::Method::GET;
    for i in 0..CRS {
        assert_eq!(
            tally.count(&get, &format!("/configmaps/s{i}-cm")),
            0,
            "s{i}-cm read alone"
        );
    }
    let patches = tally.count(&http::Method::PATCH, "");
    assert!(patches <= 3, "only the new CR's writes: {patches}");
    h.stop().await;
}

/// A CRD of `kind` that watches every namespace, with `workers`.
fn crd_everywhere(name: &str, kind: &str, workers: usize) -> String {
    format!(
        "    {name}:\n      apiTypes: {{group: GROUP, version: v1, kind: {kind}}}\n      operatorBox:\n        reconcile: {{workers: {workers}}}\n"
    )
}

/// Issue 37, shares across CRDs: two CRDs of three workers each, one namespace with a
/// backlog in both. By default one namespace may run as many reconciles at once as the widest
/// CRD has workers (three here), over both CRDs, and one more in a CRD where it runs none:
/// at most four of the six workers, the others free for another namespace, whose CRs run
/// beside the backlog.
#[tokio::test]
async fn one_namespace_runs_at_most_its_cap_of_reconciles_over_every_crd_and_another_runs_beside_it() {
    let recorder = Arc::new(Recorder {
        delay: Duration::from_millis(300),
        ..Recorder::default()
    });
    let crds = format!("{}{}", crd_everywhere("app", "App", 3), crd_everywhere("db", "Db", 3));
    let reconcilers = [("app", recorder.clone()), ("db", recorder.clone())];
    let h = Harness::start("shares", &crds, &reconcilers, true).await;
    assert_eq!(
        h.inspect.tenants.rules().default.reconciles,
        3,
        "the widest CRD's workers"
    );
    let noisy = namespace("noisy").await.unwrap();
    const BACKLOG: usize = 12;
    for kind in ["App", "Db"] {
        for i in 0..BACKLOG {
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": format!("{}/v1", h.group), "kind": kind, "metadata": {"name": format!("n{i}")}, "spec": {},
            }))
            .unwrap();
            h.api_in(kind, &noisy.name)
                .create(&PostParams::default(), &object)
                .await
                .unwrap();
        }
    }
    let live = crate::live::serve(&h, orkestra::live::Auth::open()).await;
    eventually("the noisy namespace at its cap on /tenants", WAIT, || async {
        let (_, tenants) = crate::live::get(&format!("{live}/tenants")).await;
        let reconciling = tenants["reconciling"].as_array()?;
        let noisy = reconciling.iter().find(|r| r["namespace"] == noisy.name.as_str())?;
        (noisy["running"].as_u64()? >= 3).then_some(())
    })
    .await
    .unwrap();
    h.create("App", "quiet", json!({})).await;
    h.create("Db", "quiet", json!({})).await;
    let quiet = h.key("quiet");
    eventually("both quiet CRs reconciled", WAIT, || async {
        (recorder.count(&quiet) >= 2).then_some(())
    })
    .await
    .unwrap();
    let noisy_done = recorder
        .calls()
        .iter()
        .filter(|c| c.key.starts_with(&noisy.name))
        .count();
    assert!(
        noisy_done < 2 * BACKLOG,
        "the quiet CRs ran beside the backlog, not after it ({noisy_done} of {} done)",
        2 * BACKLOG
    );
    eventually("the backlog done", WAIT, || async {
        let calls = recorder.calls();
        (calls.iter().filter(|c| c.key.starts_with(&noisy.name)).count() >= 2 * BACKLOG).then_some(())
    })
    .await
    .unwrap();
    let peak = recorder.peak_of(&noisy.name);
    assert!(
        (3..=4).contains(&peak),
        "its cap, and one more in a CRD where it ran none; never all six workers: {peak}"
    );
    assert!(
        recorder.peak.load(Ordering::SeqCst) > peak,
        "the other namespace used the workers the cap left free"
    );
    h.stop().await;
}

/// Issue 37, shares of the API client: a namespace with a rate (`spec.tenants`) waits for
/// it, request by request, and another namespace's CR, created after its backlog, is Ready
/// before the backlog is; every CR of both ends Ready.
#[tokio::test]
async fn a_namespaces_api_rate_slows_that_namespace_only() {
    let noisy = namespace("noisy").await.unwrap();
    let crds = format!(
        "    app:\n      apiTypes: {{group: GROUP, version: v1, kind: App}}\n      operatorBox:\n        reconcile:\n          onReconcile:\n            configMaps:\n              - {{name: '{{{{ .metadata.name }}}}', data: {{x: '1'}}}}\n  tenants: {{namespaces: {{{}: {{api: {{qps: 4, burst: 4}}}}}}}}\n",
        noisy.name
    );
    let h = Harness::start("rate", &crds, &[], true).await;
    const BACKLOG: usize = 8;
    for i in 0..BACKLOG {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/v1", h.group), "kind": "App", "metadata": {"name": format!("n{i}")}, "spec": {},
        }))
        .unwrap();
        h.api_in("App", &noisy.name)
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }
    h.create("App", "quiet", json!({})).await;
    let ready = |api: Api<DynamicObject>, name: String| async move {
        let app = api.get(&name).await.ok()?;
        (app.data["status"]["conditions"][0]["status"] == "True").then_some(())
    };
    eventually("the quiet CR Ready", WAIT, || ready(h.api("App"), "quiet".into()))
        .await
        .unwrap();
    let mut noisy_ready = 0;
    for i in 0..BACKLOG {
        noisy_ready += usize::from(ready(h.api_in("App", &noisy.name), format!("n{i}")).await.is_some());
    }
    assert!(
        noisy_ready < BACKLOG,
        "the quiet CR was Ready before the rated backlog ({noisy_ready} of {BACKLOG})"
    );
    for i in 0..BACKLOG {
        eventually("the backlog Ready", WAIT, || {
            ready(h.api_in("App", &noisy.name), format!("n{i}"))
        })
        .await
        .unwrap();
    }
    let waits = h.inspect.tenants.api_waits();
    let of = |namespace: &str| waits.iter().find(|(n, _)| n == namespace).map(|(_, w)| *w);
    let waited = of(&noisy.name).expect("the noisy namespace waited");
    // Each CR writes its child and its status at least: twice the backlog, less the burst.
    assert!(waited.requests >= (2 * BACKLOG - 4) as u64, "{waited:?}");
    assert!(waited.seconds > 1.0, "{waited:?}");
    assert_eq!(of(&h.ns.name), None, "a namespace without a rate never waits");
    // The Live API and /metrics say the same.
    let live = crate::live::serve(&h, orkestra::live::Auth::open()).await;
    let (_, tenants) = crate::live::get(&format!("{live}/tenants")).await;
    assert_eq!(tenants["limits"]["api"], Value::Null, "{tenants}");
    assert_eq!(
        tenants["namespaces"][&noisy.name]["api"],
        json!({"qps": 4.0, "burst": 4.0})
    );
    assert_eq!(tenants["apiWaits"][0]["namespace"], noisy.name.as_str());
    // An Event of the last CR may still be on its way: at least as many as above.
    assert!(tenants["apiWaits"][0]["requests"].as_u64() >= Some(waited.requests));
    let metrics = reqwest::get(format!("{live}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = format!("orkestra_tenant_api_waits_total{{namespace=\"{}\"}} ", noisy.name);
    assert!(metrics.contains(&series), "{series} in /metrics");
    h.stop().await;
}

/// Issue 49, finding 10: a request was charged to the namespace in its URL, so one tenant's
/// CR writing into another tenant's namespace spent that tenant's rate. It is charged to the
/// tenant whose CR made it.
#[tokio::test]
async fn api_rate_is_charged_to_the_tenant_whose_cr_made_the_request() {
    let attacker = namespace("rate-from").await.unwrap();
    let victim = namespace("rate-into").await.unwrap();
    let hostile = orkestra_test_support::guests::component("hostile").unwrap();
    let crds = format!(
        "    sprayer:
      apiTypes: {{group: GROUP, version: v1, kind: Sprayer}}
      operatorBox:
        reconcile:
          hooks:
            component: {}
            limits: {{timeout: 20s, kubeCalls: 100}}
            capabilities:
              - {{apiVersion: v1, kinds: [ConfigMap], verbs: [apply], namespaces: ['{victim}']}}
  tenants: {{namespaces: {{{attacker}: {{api: {{qps: 2, burst: 2}}}}, {victim}: {{api: {{qps: 2, burst: 2}}}}}}}}
",
        hostile.display(),
        attacker = attacker.name,
        victim = victim.name,
    );
    let h = Harness::start("rate-charge", &crds, &[], true).await;
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", h.group), "kind": "Sprayer", "metadata": {"name": "s"},
        "spec": {"mode": "spray", "target": victim.name, "count": 8},
    }))
    .unwrap();
    h.api_in("Sprayer", &attacker.name)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let sprayed = eventually("the sprayer's status", WAIT, || async {
        let cr = h.api_in("Sprayer", &attacker.name).get("s").await.ok()?;
        cr.data["status"]["sprayed"].as_u64()
    })
    .await
    .unwrap();
    assert_eq!(sprayed, 8);
    let waits = h.inspect.tenants.api_waits();
    let of = |namespace: &str| waits.iter().find(|(n, _)| n == namespace).map(|(_, w)| *w);
    let charged = of(&attacker.name).expect("the attacker's own rate was spent");
    assert!(charged.requests >= 6, "{charged:?}");
    assert_eq!(of(&victim.name), None, "the victim's rate was spent: {waits:?}");
    h.stop().await;
}
