//! The Wasm engine's instance pool, shared by every tenant and component of a runtime, and
//! what one tenant could take of it (issue 49, findings 1 to 3): each instance holds its
//! component's footprint of the pool, counted at load as wasmtime counts it; a component one
//! of whose instances needs more than its place is refused with the numbers; kept warm
//! instances are given up for a call that needs room, so no tenant's instances can make
//! another's instantiation fail; a tenant holding its whole share waits for its own; warm
//! instances are never shared by two tenants (a CR already gone, a cluster-scoped CR); open
//! files are capped per instance and never kept; and a warm call that wrote is not run again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use orkestra_katalog::component::Declared;
use orkestra_katalog::{Capability, ComponentInstances, ComponentLimits, FileGrant};
use orkestra_test_support::{guests, namespace};
use orkestra_wasm::footprint::{self, Footprint};
use orkestra_wasm::{CallStats, Hook, Instances, Loaded, Spec, Warm, WasmHost, World};
use serde_json::Value;

use crate::warm::{caller, request};

/// A hook spec of `component` with `capabilities` and `files` (YAML), warm or fresh.
fn spec(component: &std::path::Path, capabilities: &str, files: &str, base: &std::path::Path, warm: bool) -> Spec {
    let capabilities: Vec<Capability> = serde_yaml_ng::from_str(capabilities).unwrap();
    let files: Vec<FileGrant> = serde_yaml_ng::from_str(files).unwrap();
    let limits = ComponentLimits {
        timeout: Some("3s".into()),
        ..Default::default()
    };
    let declared = Declared {
        component: component.to_str().unwrap(),
        sha256: None,
        limits: &limits,
        deletion: &Default::default(),
        instances: &ComponentInstances::default(),
        capabilities: &capabilities,
        run_first: false,
        args: None,
        service_account: None,
        files: &files,
        rollout: None,
    };
    let mut spec = Spec::compile(World::Hook, declared, base).unwrap();
    if warm {
        spec.instances = Instances::Warm(Warm {
            max_calls: 1000,
            high_water: spec.limits.memory,
        });
    }
    spec
}

fn host(cache: &tempfile::TempDir, cluster: Option<kube::Client>) -> Arc<WasmHost> {
    WasmHost::new(cluster, reqwest::Client::new(), cache.path().to_path_buf()).unwrap()
}

/// One call of `mode` by `component` (a slot name) for the CR `key`: its status, or the error.
async fn call(
    host: &WasmHost,
    (loaded, spec): (&Loaded, &Spec),
    (component, key, mode): (&str, &str, &str),
    hook: Hook,
) -> Result<Value, String> {
    let stats = CallStats::default();
    let answer = host
        .call(loaded, spec, hook, caller(component, key), &request(key, mode), &stats)
        .await
        .map_err(|e| e.to_string())?;
    let response = answer.expect("a hook answers");
    Ok(serde_json::from_str(response.status.as_deref().unwrap_or("{}")).unwrap())
}

/// A pooling engine whose components may hold at most `core` core instances each.
fn engine(core: u32) -> wasmtime::Engine {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    let mut pool = wasmtime::PoolingAllocationConfig::default();
    pool.total_component_instances(4)
        .total_core_instances(4 * 64)
        .total_memories(16)
        .total_tables(4 * 64)
        .total_stacks(4)
        .max_core_instances_per_component(core)
        .max_memories_per_component(8)
        .max_tables_per_component(64)
        .max_component_instance_size(16 << 20)
        .max_core_instance_size(16 << 20)
        .max_memory_size(1 << 30);
    config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    wasmtime::Engine::new(&config).unwrap()
}

#[test]
fn footprints_are_counted_as_the_pool_counts_them_in_every_guest_language() {
    let generous = engine(64);
    for package in [
        "echo-hook",
        "hostile",
        "rust-constructor",
        "js-echo",
        "python-echo",
        "go-echo",
        "many-memories",
        "fat-instances",
    ] {
        let path = guests::component(package).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let counted = footprint::core_instances(&bytes).expect("every example can be counted");
        let compiled = wasmtime::component::Component::new(&generous, &bytes).unwrap();
        let artifact = compiled.serialize().unwrap();
        // The pool refuses a component past its per-component maximum: at exactly the count
        // it takes it, at one fewer it does not, so the count is the pool's own.
        for (core, fits) in [(counted, true), (counted - 1, false)] {
            // SAFETY: the artifact was serialized just above by an engine of the same settings.
            let loaded = unsafe { wasmtime::component::Component::deserialize(&engine(core), &artifact) };
            assert_eq!(
                loaded.as_ref().map(|_| ()).map_err(|e| format!("{e:#}")),
                match fits {
                    true => Ok(()),
                    false => Err(format!(
                        "The component transitively contains {counted} core module instances, which exceeds the configured maximum of {core} in the pooling allocator"
                    )),
                },
                "{package}: {counted} core instances counted; a pool of {core}"
            );
        }
        let footprint = footprint::of(&compiled, Some(counted));
        eprintln!("{package}: {footprint}");
        assert!(footprint.memories >= 1, "{package}");
    }
}

#[tokio::test]
async fn a_component_past_the_instance_allowance_is_refused_at_load_with_the_numbers() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(&cache, None);
    let allowance = host.instance_allowance();
    let fat = guests::component("fat-instances").unwrap();
    let loaded = host.load(&spec(&fat, "[]", "[]", cache.path(), false)).await.unwrap();
    assert_eq!(
        loaded.footprint.core_instances, allowance.core_instances,
        "fat-instances takes the whole allowance: {}",
        loaded.footprint
    );
    // Eight more empty instances: past it.
    let text = std::fs::read_to_string(guests::examples_dir().join("wat/fat-instances.wat")).unwrap();
    let more = "  (core instance (instantiate $extra))\n".repeat(8);
    let fatter = cache.path().join("fatter.wasm");
    std::fs::write(&fatter, wat::parse_str(text.replace("  ;; MORE\n", &more)).unwrap()).unwrap();
    let refused = host
        .load(&spec(&fatter, "[]", "[]", cache.path(), false))
        .await
        .err()
        .expect("refused at load")
        .to_string();
    let expected = format!(
        "one instance needs {} core instances; the engine's pool allows {} per instance",
        allowance.core_instances + 8,
        allowance.core_instances
    );
    assert!(refused.contains(&expected), "{refused}");
}

/// Finding 2: a warm component of many core instances, kept for every namespace by two
/// CRDs, held the whole pool, and every other component's instantiation trapped.
#[tokio::test]
async fn warm_instances_kept_for_every_namespace_never_fail_another_tenants_instantiation() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(&cache, None);
    let fat = guests::component("fat-instances").unwrap();
    let warm = spec(&fat, "[]", "[]", cache.path(), true);
    // Two CRDs' slots: two loads, each version keeping its own instances.
    let kept_by = [host.load(&warm).await.unwrap(), host.load(&warm).await.unwrap()];
    for (crd, loaded) in ["fat-a", "fat-b"].into_iter().zip(&kept_by) {
        for namespace in 0..16 {
            let key = format!("team-{namespace}/cr");
            call(&host, (loaded, &warm), (crd, &key, "ok"), Hook::Reconcile)
                .await
                .unwrap();
        }
    }
    let kept = host.warm_idle();
    let pool = host.pool();
    eprintln!(
        "kept {kept} warm instances; the pool holds {} of {}",
        pool.used, pool.total
    );
    assert_eq!(kept, 32, "sixteen namespaces of two CRDs keep one each");
    // Other tenants' calls of two other components, all at once and each held for its whole
    // timeout: more than the kept instances leave of the pool.
    let fresh = spec(&fat, "[]", "[]", cache.path(), false);
    let victims = [host.load(&fresh).await.unwrap(), host.load(&fresh).await.unwrap()];
    let (host_ref, fresh_ref) = (&host, &fresh);
    let calls = ["victim-a", "victim-b"]
        .into_iter()
        .zip(&victims)
        .flat_map(|(component, loaded)| {
            (0..20).map(move |i| async move {
                let key = format!("spin-{}/cr-{i}", i % 5);
                call(host_ref, (loaded, fresh_ref), (component, &key, "ok"), Hook::Reconcile).await
            })
        });
    for answer in futures::future::join_all(calls).await {
        let error = answer.expect_err("a spinning call runs out its time");
        assert!(
            error.starts_with("did not finish within its timeout"),
            "instantiated and ran until its timeout, not refused: {error}"
        );
    }
    assert!(
        host.warm_idle() < kept,
        "kept instances were given up to make room: {} of {kept} left",
        host.warm_idle()
    );
    // A plain hook of yet another tenant, and the fat component's own tenants, still served.
    let echo = guests::component("echo-hook").unwrap();
    let echo_spec = spec(&echo, "[]", "[]", cache.path(), false);
    let echo_loaded = host.load(&echo_spec).await.unwrap();
    let status = call(
        &host,
        (&echo_loaded, &echo_spec),
        ("echo", "quiet/cr", "hello"),
        Hook::Reconcile,
    )
    .await
    .unwrap();
    assert_eq!(status["mode"], "hello");
    call(
        &host,
        (&kept_by[0], &warm),
        ("fat-a", "team-3/late", "ok"),
        Hook::Reconcile,
    )
    .await
    .unwrap();
}

/// A tenant holding its whole share with calls that run their full timeout waits for its
/// own share; another tenant's calls are served at once, and the figures say who holds what.
#[tokio::test]
async fn a_tenant_holding_its_whole_share_waits_for_its_own_and_another_does_not() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(&cache, None);
    let fat = guests::component("fat-instances").unwrap();
    let fresh = spec(&fat, "[]", "[]", cache.path(), false);
    let loaded = host.load(&fresh).await.unwrap();
    let total = host.pool().total;
    // Sixteen calls (the default wasmCalls), each spinning for its 3 s timeout: the
    // hostile tenant's whole share of core instances.
    let spinners = tokio::spawn({
        let (host, loaded, fresh) = (host.clone(), Arc::new(loaded), fresh.clone());
        async move {
            let calls = (0..16).map(|i| {
                let (host, loaded, fresh) = (host.clone(), loaded.clone(), fresh.clone());
                async move {
                    let key = format!("spin/cr-{i}");
                    call(&host, (&loaded, &fresh), ("fat", &key, "ok"), Hook::Reconcile).await
                }
            });
            futures::future::join_all(calls).await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pool = host.pool();
    let hostile = pool
        .tenants
        .iter()
        .find(|t| t.tenant == "spin")
        .expect("figures for the hostile tenant");
    eprintln!(
        "hostile holds {} of its share {}; the pool {} of {}",
        hostile.held, hostile.share, pool.used, total
    );
    assert_eq!(
        hostile.held.core_instances, hostile.share.core_instances,
        "its whole share"
    );
    assert!(hostile.held.over(&hostile.share).is_none());
    // Another tenant's call starts at once.
    let echo = guests::component("echo-hook").unwrap();
    let echo_spec = spec(&echo, "[]", "[]", cache.path(), false);
    let echo_loaded = host.load(&echo_spec).await.unwrap();
    let started = Instant::now();
    call(
        &host,
        (&echo_loaded, &echo_spec),
        ("echo", "quiet/cr", "hi"),
        Hook::Reconcile,
    )
    .await
    .unwrap();
    let quiet = started.elapsed();
    assert!(quiet < Duration::from_secs(1), "the quiet tenant waited {quiet:?}");
    for answer in spinners.await.unwrap() {
        assert!(
            answer.unwrap_err().contains("timeout"),
            "the spinners ran out their time"
        );
    }
    assert_eq!(host.pool().used, Footprint::default(), "every hold given back");
    // Sixteen guests computing for 3 s each had half a core between them (the default
    // wasmCpu): its second in hand and 3 s at its rate, and they waited out the rest.
    let cpu = host.tenant_cpu();
    let spin = cpu.iter().find(|(t, _)| t == "spin").map(|(_, used)| *used).unwrap();
    eprintln!(
        "the spinning tenant used {:.2} s of CPU and waited {:.2} s",
        spin.used, spin.waited
    );
    assert!(spin.used < 0.5 + 0.5 * 3.5, "{spin:?}");
    assert!(spin.waited > 1.0, "{spin:?}");
}

/// Finding 1: calls with no namespace of their own (a CR already gone, a cluster-scoped CR)
/// shared one tenant's warm instances.
#[tokio::test]
async fn a_gone_or_cluster_scoped_crs_call_never_gets_another_tenants_warm_instance() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(&cache, None);
    let hostile = guests::component("hostile").unwrap();
    let warm = spec(&hostile, "[]", "[]", cache.path(), true);
    let loaded = host.load(&warm).await.unwrap();
    let gone = |key: &'static str| {
        let (host, loaded, warm) = (&host, &loaded, &warm);
        async move {
            // As the runtime calls on-not-found: no object, so no namespace from it.
            let mut caller = caller("hostile", key);
            caller.namespace = None;
            let stats = CallStats::default();
            let mut req = request(key, "recall");
            req.object = None;
            let response = host
                .call(loaded, warm, Hook::NotFound, caller, &req, &stats)
                .await
                .unwrap()
                .unwrap();
            let status: Value = serde_json::from_str(response.status.as_deref().unwrap()).unwrap();
            status["seen"].as_str().unwrap().to_string()
        }
    };
    assert_eq!(gone("team-b/nf3").await, "");
    assert_eq!(gone("team-a/nf4").await, "", "team-a never gets team-b's instance");
    assert_eq!(gone("team-b/nf5").await, "team-b/nf3", "team-b gets its own back");
    // Cluster-scoped CRs: each a tenant of its own.
    let cluster = |key: &'static str| {
        let (host, loaded, warm) = (&host, &loaded, &warm);
        async move {
            let mut caller = caller("hostile", key);
            caller.namespace = None;
            let stats = CallStats::default();
            let response = host
                .call(loaded, warm, Hook::Reconcile, caller, &request(key, "recall"), &stats)
                .await
                .unwrap()
                .unwrap();
            let status: Value = serde_json::from_str(response.status.as_deref().unwrap()).unwrap();
            status["seen"].as_str().unwrap().to_string()
        }
    };
    assert_eq!(cluster("alpha").await, "");
    assert_eq!(cluster("beta").await, "", "beta never sees alpha's key");
    assert_eq!(cluster("alpha").await, "alpha", "alpha's own instance");
}

/// Finding 2, open files: a guest opening its granted file again and again, keeping each
/// handle in a warm instance, took the process to its open-file limit.
#[tokio::test]
async fn open_files_are_capped_per_instance_and_an_instance_holding_any_is_not_kept() {
    let cache = tempfile::tempdir().unwrap();
    let bundle = cache.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    std::fs::write(bundle.join("policy.txt"), "allow").unwrap();
    let host = host(&cache, None);
    let hostile = guests::component("hostile").unwrap();
    let warm = spec(
        &hostile,
        "[]",
        "[{path: bundle, mountPath: /bundle}]",
        cache.path(),
        true,
    );
    let loaded = host.load(&warm).await.unwrap();
    let stats = CallStats::default();
    for i in 0..20 {
        let key = format!("team-a/cr-{i}");
        let answer = host
            .call(
                &loaded,
                &warm,
                Hook::Reconcile,
                caller("files", &key),
                &request(&key, "open-files"),
                &stats,
            )
            .await
            .unwrap()
            .unwrap();
        let status: Value = serde_json::from_str(answer.status.as_deref().unwrap()).unwrap();
        // Its granted directory is one of the 64; the rest are the file, until refused.
        assert_eq!(status["open"], 63, "{status}");
        assert!(!status["refused"].as_str().unwrap().is_empty(), "{status}");
    }
    assert_eq!(host.warm_idle(), 0, "an instance holding open files is not kept");
    let instances = stats.view().instances;
    assert_eq!(instances.retired["open_files"], 20, "{instances:?}");
    assert_eq!(instances.fresh, 20, "{instances:?}");
}

/// Finding 3: a call that wrote and then trapped on a warm instance was run again on a fresh
/// one, so its write happened twice.
#[tokio::test]
async fn a_warm_call_that_wrote_and_then_trapped_is_not_run_again() {
    let ns = namespace("pool-writes").await.unwrap();
    let cache = tempfile::tempdir().unwrap();
    let host = host(&cache, Some(ns.client.clone()));
    let hostile = guests::component("hostile").unwrap();
    let warm = spec(
        &hostile,
        "[{apiVersion: v1, kinds: [ConfigMap], verbs: [get, apply]}]",
        "[]",
        cache.path(),
        true,
    );
    let loaded = host.load(&warm).await.unwrap();
    let key = format!("{}/counter", ns.name);
    let first = call(
        &host,
        (&loaded, &warm),
        ("hostile", &key, "write-then-trap"),
        Hook::Reconcile,
    )
    .await
    .unwrap();
    assert_eq!(first["count"], 1, "a fresh instance writes and answers");
    // The kept instance writes again, then traps: the call fails, and is not run again.
    let second = call(
        &host,
        (&loaded, &warm),
        ("hostile", &key, "write-then-trap"),
        Hook::Reconcile,
    )
    .await
    .unwrap_err();
    assert!(second.contains("then trapped on a reused instance"), "{second}");
    let maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(ns.client.clone(), &ns.name);
    let count = maps.get("counter-count").await.unwrap().data.unwrap()["count"].clone();
    assert_eq!(count, "2", "two calls, two writes: none repeated");
}
