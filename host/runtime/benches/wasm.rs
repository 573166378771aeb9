//! Wasm host figures: per-call overhead of a hook that returns a small result for a ~4 KB
//! custom resource (fresh pooled instance, call, JSON both ways), the same work done by a
//! native Rust function and the ratio; compile and cached-load times of the component; and
//! the time from a replaced component file to the first call served by the new version; and,
//! load and call times of a Python, a TypeScript and a Go hook for scale (when they can be built).
//! Target on the project's 2-core machines: p50 under 25 µs per call.
//! Run: `cargo bench -p orkestra --bench wasm`.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use orkestra_katalog::ComponentLimits;
use orkestra_katalog::component::Declared;
use orkestra_wasm::{Caller, Components, Gvk, Hook, Request, Spec, WasmHost, World};
use serde_json::{Value, json};

/// A CR of about 4 KB.
fn cr() -> Value {
    let items: Vec<Value> = (0..50)
        .map(|i| json!({"name": format!("item-{i}"), "port": 8000 + i, "enabled": i % 2 == 0, "tags": ["a", "b"]}))
        .collect();
    json!({
        "apiVersion": "demo.orkestra.io/v1", "kind": "Website",
        "metadata": {
            "name": "shop", "namespace": "web", "uid": "6f1c2a", "generation": 4, "resourceVersion": "123456",
            "labels": {"tier": "gold", "team": "payments", "env": "prod"},
            "annotations": {"orkestra.orkspace.io/managed-by": "website", "note": "x".repeat(400)},
        },
        "spec": {"mode": "ok", "image": "nginx", "tag": "1.27", "replicas": 3, "items": items},
    })
}

fn hook_spec(path: &Path) -> Spec {
    let limits = ComponentLimits::default();
    let declared = Declared {
        component: path.to_str().expect("utf-8 path"),
        sha256: None,
        limits: &limits,
        deletion: &Default::default(),
        capabilities: &[],
        run_first: false,
        args: None,
        service_account: None,
        files: &[],
    };
    Spec::compile(World::Hook, declared, Path::new(".")).expect("spec")
}

fn request(object: &Value) -> Request {
    Request {
        key: "web/shop".into(),
        gvk: Gvk {
            group: "demo.orkestra.io".into(),
            version: "v1".into(),
            kind: "Website".into(),
        },
        target: None,
        object: Some(object.to_string()),
        event_id: None,
        sentinels: vec!["generationChanged".into()],
        context: "{}".into(),
    }
}

fn caller() -> Caller {
    Caller {
        component: "bench".into(),
        key: "web/shop".into(),
        namespace: Some("web".into()),
        manager: "orkestra-wasm/test".into(),
        client: None,
    }
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6;
    (at(0.50), at(0.99))
}

#[derive(serde::Deserialize)]
struct Cr {
    spec: ModeSpec,
}

#[derive(serde::Deserialize)]
struct ModeSpec {
    mode: String,
}

/// What the hook does, natively: serialize the CR (as the host does for the guest), read the
/// mode through a typed parse (as the guest does), answer with a status field, which the host
/// parses back.
fn native(object: &Value) -> Value {
    let text = object.to_string();
    let cr: Cr = serde_json::from_str(&text).expect("json");
    let status = json!({ "mode": cr.spec.mode }).to_string();
    serde_json::from_str(&status).expect("json")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let path = orkestra_test_support::guests::component("echo-hook").expect("build the example guest");
    let cache = tempfile::tempdir().expect("tempdir");
    let object = cr();
    println!(
        "Wasm host (component {} KB, CR {} bytes)",
        std::fs::metadata(&path).unwrap().len() / 1024,
        object.to_string().len()
    );

    let host = WasmHost::new(None, reqwest::Client::new(), cache.path().join("wasm")).expect("host");
    let spec = hook_spec(&path);
    let started = Instant::now();
    let loaded = host.load(&spec).await.expect("load");
    println!(
        "  first load (compile + pre-instantiate): {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let fresh = WasmHost::new(None, reqwest::Client::new(), cache.path().join("wasm")).expect("host");
    let cached = fresh.load(&spec).await.expect("cached load");
    assert!(cached.cached, "the second host finds the artifact");
    println!(
        "  load from the artifact cache: {:.2} ms",
        cached.load_time.as_secs_f64() * 1e3
    );
    println!("  pooling allocator: {}", host.pooling);

    // The host's own bookkeeping of each call, as a slot keeps it.
    let stats = orkestra_wasm::CallStats::default();
    let runs = 3000;
    let mut wasm = Vec::with_capacity(runs);
    for i in 0..runs + 300 {
        let started = Instant::now();
        let request = request(&object);
        let response = host
            .call(&loaded, &spec, Hook::Reconcile, caller(), &request, &stats)
            .await
            .expect("call")
            .expect("response");
        let status: Value = serde_json::from_str(response.status.as_deref().unwrap_or("{}")).expect("status");
        black_box(status);
        if i >= 300 {
            wasm.push(started.elapsed());
        }
    }
    let mut native_samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        black_box(native(&object));
        native_samples.push(started.elapsed());
    }
    let (w50, w99) = percentiles(wasm);
    let (n50, n99) = percentiles(native_samples);
    println!("  per call, Wasm hook:   p50 {w50:.1} µs  p99 {w99:.1} µs  (target p50 < 25 µs)");
    println!("  per call, native Rust: p50 {n50:.1} µs  p99 {n99:.1} µs");
    println!("  ratio (p50): {:.1}x", w50 / n50);

    // Other languages for scale: a Python hook (componentize-py), a TypeScript one
    // (componentize-js) and a Go one (wasip1, adapted), each when it can be built.
    for (language, package) in [("Python", "python-hook"), ("TypeScript", "js-hook"), ("Go", "go-hook")] {
        let path = match orkestra_test_support::guests::component(package) {
            Ok(path) => path,
            Err(error) => {
                println!("  {language} hook: skipped ({error})");
                continue;
            }
        };
        let spec = hook_spec(&path);
        let started = Instant::now();
        let loaded = host.load(&spec).await.expect("load the hook");
        let first = started.elapsed();
        let cached = WasmHost::new(None, reqwest::Client::new(), cache.path().join("wasm"))
            .expect("host")
            .load(&spec)
            .await
            .expect("cached load");
        let mut samples = Vec::new();
        for i in 0..230 {
            let started = Instant::now();
            let response = host
                .call(&loaded, &spec, Hook::Reconcile, caller(), &request(&object), &stats)
                .await
                .expect("call")
                .expect("response");
            black_box(response);
            if i >= 30 {
                samples.push(started.elapsed());
            }
        }
        let (p50, p99) = percentiles(samples);
        println!(
            "  {language} hook ({} MB): first load {:.1} s, cached load {:.0} ms, per call p50 {:.2} ms p99 {:.2} ms",
            std::fs::metadata(&path).map(|m| m.len() >> 20).unwrap_or(0),
            first.as_secs_f64(),
            cached.load_time.as_secs_f64() * 1e3,
            p50 / 1e3,
            p99 / 1e3
        );
    }

    // Hot swap: the file is replaced while calls keep coming; how long until one is served
    // by the new version?
    let dir = tempfile::tempdir().expect("tempdir");
    let live = dir.path().join("hook.wasm");
    std::fs::copy(&path, &live).expect("copy");
    let other = orkestra_test_support::guests::component("rust-hook").expect("build the second guest");
    let components = Components::default();
    let slot = components.add("swap", &host, Arc::new(hook_spec(&live)));
    slot.reload().await.expect("first version");
    // The first version compiled above; load the second once so the swap measures the swap.
    host.load(&hook_spec(&other)).await.expect("warm the second version");
    let watcher = tokio::spawn(components.clone().watch_files(orkestra::runtime::COMPONENT_POLL));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut swaps = Vec::new();
    for round in 0..5 {
        let source = if round % 2 == 0 { &other } else { &path };
        let before = slot.active().expect("serving").revision;
        let replaced = Instant::now();
        std::fs::write(dir.path().join("next.wasm"), std::fs::read(source).expect("read")).expect("write");
        std::fs::rename(dir.path().join("next.wasm"), &live).expect("rename");
        loop {
            let active = slot.active().expect("serving");
            let _ = slot.call(&active, Hook::Reconcile, caller(), &request(&object)).await;
            if active.revision > before {
                swaps.push(replaced.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    watcher.abort();
    let (s50, _) = percentiles(swaps.clone());
    let max = swaps.iter().max().copied().unwrap_or_default();
    println!(
        "  replaced file -> first call on the new version: median {:.0} ms, max {:.0} ms (poll every {} ms)",
        s50 / 1e3,
        max.as_secs_f64() * 1e3,
        orkestra::runtime::COMPONENT_POLL.as_millis()
    );
}
