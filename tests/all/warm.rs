//! Warm instances (`instances.reuse: warm`): an instance kept after a call serves later
//! calls of the same namespace's CRs on the same version, and is given up after
//! `maxCalls`, after a call that failed, above its memory high-water mark, and at a swap.
//! The hostile component's `recall` mode says which key a page of its memory held when the
//! call began, so each call shows which instance it ran on.

use kube::api::{DynamicObject, PostParams};
use orkestra_test_support::{eventually, guests, namespace};
use orkestra_wasm::{CallStats, Caller, Gvk, Hook, Instances, Loaded, Request, Response, Spec, Warm, WasmHost};
use serde_json::{Value, json};

use crate::pipeline::{Harness, WAIT, crd};

pub(crate) fn request(key: &str, mode: &str) -> Request {
    Request {
        key: key.into(),
        gvk: Gvk {
            group: "warm.orkestra.io".into(),
            version: "v1".into(),
            kind: "Probe".into(),
        },
        target: None,
        object: Some(json!({"spec": {"mode": mode}}).to_string()),
        event_id: None,
        sentinels: Vec::new(),
        context: "{}".into(),
    }
}

/// The caller of a call of `component` for the CR `key`, as the runtime makes it.
pub(crate) fn caller(component: &str, key: &str) -> Caller {
    Caller {
        component: component.into(),
        key: key.into(),
        namespace: key.split_once('/').map(|(ns, _)| ns.to_string()),
        manager: "orkestra-wasm/test".into(),
        client: None,
        owner_uid: None,
        writes: Default::default(),
    }
}

/// A call for the CR `namespace/name`, as the runtime makes it.
async fn call(
    host: &WasmHost,
    (loaded, spec): (&Loaded, &Spec),
    stats: &CallStats,
    key: &str,
    mode: &str,
) -> Result<Response, String> {
    let caller = caller("warm", key);
    match host
        .call(loaded, spec, Hook::Reconcile, caller, &request(key, mode), stats)
        .await
    {
        Ok(response) => Ok(response.expect("a hook answers on-reconcile")),
        Err(error) => Err(error.to_string()),
    }
}

fn status(response: &Response) -> Value {
    serde_json::from_str(response.status.as_deref().unwrap_or("{}")).unwrap()
}

/// The key the instance's page held when the call `key` began.
async fn seen(host: &WasmHost, component: (&Loaded, &Spec), stats: &CallStats, key: &str) -> String {
    let response = call(host, component, stats, key, "recall").await.unwrap();
    status(&response)["seen"].as_str().unwrap().to_string()
}

/// A host (its cache dir kept by the caller) with the hostile component loaded as a hook.
async fn hostile() -> (std::sync::Arc<WasmHost>, Spec, Loaded, tempfile::TempDir) {
    let path = guests::component("hostile").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let host = WasmHost::new(None, reqwest::Client::new(), cache.path().to_path_buf()).unwrap();
    let spec = guests::hook_spec(path.to_str().unwrap(), None).unwrap();
    let loaded = host.load(&spec).await.unwrap();
    (host, spec, loaded, cache)
}

#[tokio::test]
async fn a_warm_instance_serves_only_its_namespace_and_is_given_up_after_max_calls_a_failure_its_high_water_or_a_swap()
{
    let (host, fresh_spec, loaded, _cache) = hostile().await;

    // Fresh (the default): no call sees another's key, even in one namespace.
    let stats = CallStats::default();
    let fresh = (&loaded, &fresh_spec);
    assert_eq!(seen(&host, fresh, &stats, "a/1").await, "");
    assert_eq!(seen(&host, fresh, &stats, "a/2").await, "");
    assert_eq!(host.warm_idle(), 0, "a fresh instance is never kept");
    // What one instance holds after a call: the high-water mark is set 1.5 MiB above it.
    let base = stats.memory_high_water() as usize;

    let mut spec = fresh_spec.clone();
    spec.instances = Instances::Warm(Warm {
        max_calls: 3,
        high_water: base + (3 << 20) / 2,
    });
    let stats = CallStats::default();
    let warm = (&loaded, &spec);
    assert_eq!(seen(&host, warm, &stats, "a/1").await, "", "the namespace's first call");
    assert_eq!(
        seen(&host, warm, &stats, "a/2").await,
        "a/1",
        "the same namespace: the kept instance"
    );
    assert_eq!(
        seen(&host, warm, &stats, "b/1").await,
        "",
        "another namespace never gets a's instance"
    );
    assert_eq!(seen(&host, warm, &stats, "a/3").await, "a/2", "its third and last call");
    assert_eq!(seen(&host, warm, &stats, "a/4").await, "", "maxCalls: 3 gave it up");
    // A call that fails on a warm instance is retried at once on a fresh one.
    let answer = call(&host, warm, &stats, "a/5", "fresh-only").await.unwrap();
    assert_eq!(
        status(&answer)["calls"],
        1,
        "served by a fresh instance after the warm one trapped"
    );
    let trapped = call(&host, warm, &stats, "a/6", "panic").await.unwrap_err();
    assert!(
        trapped.contains("gave up"),
        "fails on the fresh instance too: {trapped}"
    );
    assert_eq!(
        seen(&host, warm, &stats, "a/7").await,
        "",
        "the failed calls' instances were given up"
    );
    // Each hoard keeps 1 MiB more: the second leaves it above its high-water mark.
    for hoarded in 1..=2 {
        let response = call(&host, warm, &stats, "c/1", "hoard").await.unwrap();
        assert_eq!(status(&response)["hoarded"], hoarded, "the same instance both times");
    }
    assert_eq!(
        seen(&host, warm, &stats, "c/2").await,
        "",
        "above its high water it was given up"
    );
    let view = stats.view().instances;
    assert_eq!((view.fresh, view.reused), (8, 5), "{view:?}");
    assert_eq!(view.retired["max_calls"], 1, "{view:?}");
    assert_eq!(view.retired["failed_call"], 3, "{view:?}");
    assert_eq!(view.retired["memory_high_water"], 1, "{view:?}");

    // Calls of one namespace at once each need an instance; at most 4 are kept for it.
    let kept = host.warm_idle();
    let keys: Vec<String> = (0..6).map(|i| format!("d/{i}")).collect();
    let slow: Vec<_> = keys.iter().map(|key| call(&host, warm, &stats, key, "slow")).collect();
    for answer in futures::future::join_all(slow).await {
        answer.unwrap();
    }
    assert_eq!(
        host.warm_idle(),
        kept + 4,
        "one namespace keeps at most 4 idle instances"
    );

    // A swap: the next version's calls never get the last one's instances.
    let next = host.load(&spec).await.unwrap();
    assert_eq!(
        seen(&host, (&next, &spec), &stats, "b/2").await,
        "",
        "b/1's instance is of the old version"
    );
    assert_eq!(
        seen(&host, warm, &stats, "b/3").await,
        "b/1",
        "still kept for the old version"
    );
    drop(loaded);
    assert_eq!(seen(&host, (&next, &spec), &stats, "b/4").await, "b/2");
    assert_eq!(host.warm_idle(), 1, "the old version's instances went with it");
}

#[tokio::test]
async fn a_warm_instance_of_each_guest_language_serves_call_after_call_each_for_its_own_request() {
    let cache = tempfile::tempdir().unwrap();
    let host = WasmHost::new(None, reqwest::Client::new(), cache.path().to_path_buf()).unwrap();
    for package in ["echo-hook", "js-echo", "python-echo", "go-echo"] {
        let path = guests::component(package).unwrap();
        let mut spec = guests::hook_spec(path.to_str().unwrap(), None).unwrap();
        spec.instances = Instances::Warm(Warm {
            max_calls: 1000,
            high_water: spec.limits.memory,
        });
        let loaded = host.load(&spec).await.unwrap();
        let stats = CallStats::default();
        // Enough calls, each handing over and back a few KB, for what a guest keeps between
        // calls to build up.
        const CALLS: u64 = 200;
        for i in 0..CALLS {
            let mode = format!("{i}:{}", "x".repeat(2000));
            let response = call(&host, (&loaded, &spec), &stats, "team/site", &mode).await.unwrap();
            assert_eq!(status(&response)["mode"], mode, "{package}");
        }
        let view = stats.view().instances;
        assert_eq!((view.fresh, view.reused), (1, CALLS - 1), "{package}: {view:?}");
    }
}

/// A `Probe` operator on the hostile guest, one worker, instances kept warm.
fn warm_probe_box() -> String {
    let component = guests::component("hostile").unwrap();
    format!(
        "        reconcile:
          workers: 1
          hooks:
            component: {}
            instances: {{reuse: warm}}
",
        component.display()
    )
}

/// What the hostile guest reported it saw last, once `name`'s status has it.
async fn status_seen(api: &kube::Api<DynamicObject>, name: &str) -> String {
    eventually(&format!("{name}'s status.seen"), WAIT, || async {
        let cr = serde_json::to_value(api.get(name).await.ok()?).ok()?;
        cr["status"]["seen"].as_str().map(String::from)
    })
    .await
    .unwrap()
}

/// The runtime keeps warm instances per namespace: a CR finds what the last call of its own
/// namespace left, never another namespace's.
#[tokio::test]
async fn the_runtime_reuses_a_warm_instance_within_a_namespace_and_never_across() {
    let operator_box = warm_probe_box();
    // All namespaces: the harness's and another.
    let crds = crd("probe", "Probe", &operator_box).replace("      namespace: NS\n", "");
    let h = Harness::start("warm", &crds, &[], true).await;
    let other = namespace("warm-other").await.unwrap();
    h.create("Probe", "first", json!({"mode": "recall"})).await;
    status_seen(&h.api("Probe"), "first").await;
    h.create("Probe", "second", json!({"mode": "recall"})).await;
    let second = status_seen(&h.api("Probe"), "second").await;
    assert!(
        second.starts_with(&format!("{}/", h.ns.name)),
        "second ran on the instance its namespace's last call left: {second:?}"
    );
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", h.group), "kind": "Probe",
        "metadata": {"name": "third"}, "spec": {"mode": "recall"},
    }))
    .unwrap();
    let third_api = h.api_in("Probe", &other.name);
    third_api.create(&PostParams::default(), &object).await.unwrap();
    let third = status_seen(&third_api, "third").await;
    assert!(
        !third.starts_with(&format!("{}/", h.ns.name)),
        "another namespace's CR saw {third:?}"
    );
    let slot = h.inspect.components.slots().into_iter().next().unwrap();
    let status = slot.status();
    assert_eq!(status.instances["reuse"], "warm");
    assert!(status.calls.instances.reused >= 1, "{:?}", status.calls.instances);
    h.stop().await;
}

/// Not warm-specific, but what a warm instance would accumulate call after call: resource
/// handles the guest never drops are host memory, capped per instance.
#[tokio::test]
async fn a_guest_that_keeps_taking_resource_handles_is_stopped_at_the_cap() {
    let (host, spec, loaded, _cache) = hostile().await;
    let stats = CallStats::default();
    // 10,000 handles: well under wasmtime's own default of a million, over the cap.
    const { assert!(orkestra_wasm::MAX_RESOURCES < 10_000) };
    let error = call(&host, (&loaded, &spec), &stats, "a/1", "handles")
        .await
        .unwrap_err();
    assert!(error.starts_with("trapped"), "{error}");
    // The instance is gone with its handles; the next call is served.
    assert_eq!(seen(&host, (&loaded, &spec), &stats, "a/2").await, "");
}

/// Issue 49, finding 1: cluster-scoped CRs have no namespace, and their calls shared one
/// pool of warm instances, so a guest that kept each call's key saw another CR's. Each is a
/// tenant of its own now.
#[tokio::test]
async fn cluster_scoped_crs_never_share_a_warm_instance() {
    let operator_box = warm_probe_box();
    let crds = crd("probe", "Probe", &operator_box).replace("      namespace: NS\n", "      namespaced: false\n");
    let h = Harness::start("warm-cluster", &crds, &[], true).await;
    let gvk = kube::api::GroupVersionKind::gvk(&h.group, "v1", "Probe");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "probes");
    let api: kube::Api<DynamicObject> = kube::Api::all_with(h.ns.client.clone(), &resource);
    let mut seen = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/v1", h.group), "kind": "Probe",
            "metadata": {"name": name}, "spec": {"mode": "recall"},
        }))
        .unwrap();
        api.create(&PostParams::default(), &object).await.unwrap();
        seen.push(status_seen(&api, name).await);
    }
    for (name, got) in ["alpha", "beta", "gamma"].iter().zip(&seen) {
        assert!(got.is_empty() || got == name, "{name} saw {got:?}");
    }
    // Its own instance serves it again.
    api.patch(
        "alpha",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": {"mode": "recall", "again": true}})),
    )
    .await
    .unwrap();
    eventually("alpha seen again", WAIT, || async {
        let cr = serde_json::to_value(api.get("alpha").await.ok()?).ok()?;
        (cr["status"]["seen"] == "alpha").then_some(())
    })
    .await
    .unwrap();
    // Cluster-scoped CRs outlive the test's namespace: removed while the runtime runs.
    for name in ["alpha", "beta", "gamma"] {
        api.delete(name, &Default::default()).await.unwrap();
    }
    eventually("the probes gone", WAIT, || async {
        api.list(&Default::default()).await.ok()?.items.is_empty().then_some(())
    })
    .await
    .unwrap();
    h.stop().await;
}
