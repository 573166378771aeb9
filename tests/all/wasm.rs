//! Wasm hooks and constructors against the real API server: the example components built
//! from examples/, run by the runtime on the example Katalogs (each CRD confined to the
//! test's namespace), then the objects, status and conditions they promise checked.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ResourceQuota, Service};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use orkestra_test_support::{TestNamespace, eventually, guests, kubectl};
use orkestra_wasm::{Components, Slot};
use serde_json::{Value, json};

use crate::ork::ORK;
use crate::pipeline::WAIT;
use crate::running::Running;

fn katalogs_dir() -> PathBuf {
    crate::running::katalogs_dir()
}

pub(crate) use orkestra_test_support::guests::hook_spec;

/// Lowercase hex sha256, as digests are written.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Slot `name` as the Live API at `addr` lists it on `/components`.
pub(crate) async fn listed_component(addr: &str, name: &str) -> Value {
    let listed: Value = reqwest::get(format!("http://{addr}/components"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    listed["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no component {name} in {listed}"))
        .clone()
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

fn ready(status: &Value) -> bool {
    condition(status, "Ready")["status"] == "True"
}

fn not_ready_because(reason: &'static str) -> impl Fn(&Value) -> bool {
    move |status| condition(status, "Ready")["reason"] == reason
}

async fn page(ns: &TestNamespace, name: &str) -> String {
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let found = eventually(&format!("ConfigMap {name}"), WAIT, || async {
        configmaps.get_opt(name).await.ok().flatten()
    })
    .await
    .unwrap();
    found.data.unwrap_or_default().remove("index.html").unwrap_or_default()
}

#[tokio::test]
async fn a_hybrid_site_gets_template_children_and_hook_content_per_target() {
    let dir = katalogs_dir().join("site-hook");
    let run = Running::start("site-hook", &[dir.join("katalog.yaml")], &["rust-hook"]).await;
    run.apply(&dir.join("samples/site.yaml")).await;
    let sites = run.crs("hooks.orkestra.io", "Site");

    let status = run
        .status(&sites, "blog", |s| ready(s) && s["pageBytes"].is_number())
        .await;
    assert_eq!(status["renderedBy"], "rust-hook");
    assert_eq!(
        status["url"],
        format!("http://blog.{}.svc", run.ns.name),
        "template fields still apply"
    );
    assert!(
        condition(&status, "Component")["message"]
            .as_str()
            .unwrap()
            .starts_with("site (sha256 "),
        "{status}"
    );
    let content = page(&run.ns, "blog-content").await;
    assert!(content.contains("<h1>Hello: Field notes</h1>"), "{content}");
    assert!(
        content.contains("<footer>Served by Orkestra-rs</footer>"),
        "the hook read site-defaults through its grant: {content}"
    );
    assert_eq!(status["pageBytes"], content.len());
    let configmaps: Api<ConfigMap> = Api::namespaced(run.ns.client.clone(), &run.ns.name);
    let metadata = configmaps.get("blog-content").await.unwrap().metadata;
    assert_eq!(
        metadata.labels.unwrap()["app"],
        "blog",
        "the templated arg `site` reached the hook"
    );
    let owners = metadata.owner_references.unwrap();
    assert_eq!((owners[0].kind.as_str(), owners[0].name.as_str()), ("Site", "blog"));
    let deployments: Api<Deployment> = Api::namespaced(run.ns.client.clone(), &run.ns.name);
    assert!(
        deployments.get_opt("blog").await.unwrap().is_some(),
        "the template's Deployment"
    );

    // The canary target has its own component slot, with its own arguments.
    let beta = run
        .status(&sites, "beta", |s| ready(s) && s["pageBytes"].is_number())
        .await;
    assert!(page(&run.ns, "beta-content").await.contains("<h1>Canary: Beta</h1>"));
    assert!(
        condition(&beta, "Component")["message"]
            .as_str()
            .unwrap()
            .starts_with("site/canary (sha256 "),
        "{beta}"
    );

    // An update re-renders; deletion runs on-delete and lets the finalizer go.
    sites
        .patch(
            "blog",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"body": "Changed."}})),
        )
        .await
        .unwrap();
    eventually("the new body", WAIT, || async {
        let content = page(&run.ns, "blog-content").await;
        content.contains("Changed.").then_some(())
    })
    .await
    .unwrap();
    kubectl(&[
        "delete",
        "sites.hooks.orkestra.io",
        "blog",
        "-n",
        &run.ns.name,
        "--wait=false",
    ])
    .unwrap();
    eventually("blog to be gone", WAIT, || async {
        sites.get_opt("blog").await.ok().flatten().is_none().then_some(())
    })
    .await
    .unwrap();
    run.stop().await;
}

#[tokio::test]
async fn a_constructor_owns_reconcile_and_its_errors_reach_ready() {
    let dir = katalogs_dir().join("cache-constructor");
    let run = Running::start("cache-ctor", &[dir.join("katalog.yaml")], &["rust-constructor"]).await;
    run.apply(&dir.join("samples/cache.yaml")).await;
    let caches = run.crs("constructors.orkestra.io", "Cache");
    let status = run.status(&caches, "sessions", ready).await;
    assert_eq!(status["endpoint"], format!("sessions.{}.svc:6379", run.ns.name));
    assert_eq!(status["phase"], "Provisioned");
    let deployments: Api<Deployment> = Api::namespaced(run.ns.client.clone(), &run.ns.name);
    let deployment = deployments.get("sessions").await.unwrap();
    assert_eq!(deployment.spec.unwrap().replicas, Some(2));
    let owner = &deployment.metadata.owner_references.unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Cache", Some(true)));
    let services: Api<Service> = Api::namespaced(run.ns.client.clone(), &run.ns.name);
    assert!(services.get_opt("sessions").await.unwrap().is_some());
    let configmaps: Api<ConfigMap> = Api::namespaced(run.ns.client.clone(), &run.ns.name);
    let settings = configmaps.get("sessions-settings").await.unwrap().data.unwrap();
    assert_eq!(settings["maxmemory"], "128mb");

    // A child the constructor stops returning is deleted.
    caches
        .patch(
            "sessions",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"expose": false}})),
        )
        .await
        .unwrap();
    eventually("the Service to go", WAIT, || async {
        services
            .get_opt("sessions")
            .await
            .ok()
            .flatten()
            .is_none()
            .then_some(())
    })
    .await
    .unwrap();
    assert!(
        deployments.get_opt("sessions").await.unwrap().is_some(),
        "the rest stays"
    );

    // The constructor's own error is the Ready reason; nothing it returned is applied.
    run.create(&caches, "Cache", "huge", json!({"replicas": 9})).await;
    let failed = run.status(&caches, "huge", not_ready_because("TooManyReplicas")).await;
    assert!(
        condition(&failed, "Ready")["message"]
            .as_str()
            .unwrap()
            .contains("at most 5")
    );
    assert!(deployments.get_opt("huge").await.unwrap().is_none());
    // Counted under the one label for every component's own reason: a guest cannot grow
    // the set of failure labels.
    let by_reason = run.counters("cache").failures_by_reason();
    assert!(
        by_reason.get("ComponentFailed").is_some_and(|n| *n >= 1),
        "{by_reason:?}"
    );
    assert!(!by_reason.contains_key("TooManyReplicas"), "{by_reason:?}");

    kubectl(&[
        "delete",
        "caches.constructors.orkestra.io",
        "sessions",
        "-n",
        &run.ns.name,
        "--wait=false",
    ])
    .unwrap();
    eventually("sessions to be gone", WAIT, || async {
        caches.get_opt("sessions").await.ok().flatten().is_none().then_some(())
    })
    .await
    .unwrap();
    run.stop().await;
}

#[tokio::test]
async fn a_python_hook_sizes_each_teams_quota() {
    let dir = katalogs_dir().join("team-quota");
    let run = Running::start("team-quota", &[dir.join("katalog.yaml")], &["python-hook"]).await;
    run.apply(&dir.join("samples/team.yaml")).await;
    let teams = run.crs("python.orkestra.io", "Team");
    let status = run.status(&teams, "payments", ready).await;
    assert_eq!((status["cpu"].as_u64(), status["members"].as_u64()), (Some(6), Some(3)));
    assert_eq!(status["renderedBy"], "python-hook");
    let quotas: Api<ResourceQuota> = Api::namespaced(run.ns.client.clone(), &run.ns.name);
    let quota = quotas.get("payments-quota").await.unwrap();
    let hard = quota.spec.unwrap().hard.unwrap();
    assert_eq!(hard["requests.cpu"].0, "6");
    assert_eq!(quota.metadata.owner_references.unwrap()[0].name, "payments");

    run.create(&teams, "Team", "odd", json!({"tier": "platinum"})).await;
    let failed = run.status(&teams, "odd", not_ready_because("UnknownTier")).await;
    assert!(
        condition(&failed, "Ready")["message"]
            .as_str()
            .unwrap()
            .contains("'platinum'")
    );
    run.stop().await;
}

/// The notes contract, which the TypeScript and the Go hook both serve: the text in the case
/// the spec asks for, signed from the namespace's `note-defaults` (read through the host),
/// unsigned when that is not found, an unknown case refused. Returns the run and its Notes.
async fn notes_are_written(katalog: &str, group: &str, package: &str, hello: &str) -> (Running, Api<DynamicObject>) {
    let dir = katalogs_dir().join(katalog);
    let run = Running::start(katalog, &[dir.join("katalog.yaml")], &[package]).await;
    let maps: Api<ConfigMap> = Api::namespaced(run.ns.client.clone(), &run.ns.name);
    let defaults: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "note-defaults"}, "data": {"signature": "ops"},
    }))
    .unwrap();
    maps.create(&PostParams::default(), &defaults).await.unwrap();
    run.apply(&dir.join("samples/note.yaml")).await;
    let notes = run.crs(group, "Note");
    let status = run.status(&notes, "hello", ready).await;
    let written = format!("{hello}\n-- ops");
    assert_eq!(status["length"].as_u64(), Some(written.len() as u64), "{status}");
    assert_eq!(status["renderedBy"], package);
    let note = maps.get("hello-note").await.unwrap();
    assert_eq!(note.data.unwrap()["text"], written, "the text, in upper case, signed");
    assert_eq!(note.metadata.owner_references.unwrap()[0].name, "hello");

    // Without the defaults the kube read fails as not-found, which the hook takes as unsigned.
    maps.delete("note-defaults", &Default::default()).await.unwrap();
    run.create(&notes, "Note", "plain", json!({"text": "Quiet", "case": "lower"}))
        .await;
    run.status(&notes, "plain", ready).await;
    assert_eq!(maps.get("plain-note").await.unwrap().data.unwrap()["text"], "quiet");

    run.create(&notes, "Note", "odd", json!({"text": "x", "case": "title"}))
        .await;
    let failed = run.status(&notes, "odd", not_ready_because("UnknownCase")).await;
    let message = condition(&failed, "Ready")["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("\"title\" is not one of upper, lower, as"),
        "{message}"
    );
    (run, notes)
}

#[tokio::test]
async fn a_typescript_hook_writes_each_note_and_reads_its_namespaces_defaults() {
    let (run, _) = notes_are_written("notes", "notes.orkestra.io", "js-hook", "HELLO FROM TYPESCRIPT").await;
    run.stop().await;
}

#[tokio::test]
async fn a_go_hook_writes_each_note_reads_its_namespaces_defaults_and_reports_a_panic() {
    // The host's answer to kube.get comes back through Go's cabi_realloc, mid-call.
    let (run, notes) = notes_are_written("go-notes", "gonotes.orkestra.io", "go-hook", "HELLO FROM GO").await;
    // A Go panic traps the instance; the SDK logs it first, so Ready says what happened.
    run.create(&notes, "Note", "boom", json!({"text": "x", "case": "panic"}))
        .await;
    let trapped = run.status(&notes, "boom", not_ready_because("ComponentTrapped")).await;
    let message = condition(&trapped, "Ready")["message"].as_str().unwrap().to_string();
    assert!(message.contains("panic: asked to panic"), "{message}");
    run.stop().await;
}

/// Sets blog's body and returns how long until its status shows the new page.
async fn site_update(run: &Running, sites: &Api<DynamicObject>, body: &str) -> Duration {
    let started = Instant::now();
    sites
        .patch(
            "blog",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"body": body}})),
        )
        .await
        .unwrap();
    let wanted = format!("<p>{body}</p>");
    eventually("the site to show the new body", WAIT, || async {
        page(&run.ns, "blog-content").await.contains(&wanted).then_some(())
    })
    .await
    .unwrap();
    started.elapsed()
}

#[tokio::test]
async fn hostile_components_fail_only_their_own_reconciles() {
    orkestra_test_support::logs::capture();
    let files = [
        katalogs_dir().join("hostile/katalog.yaml"),
        katalogs_dir().join("site-hook/katalog.yaml"),
    ];
    let run = Running::start("hostile", &files, &["hostile", "unknown-import", "rust-hook"]).await;
    run.apply(&katalogs_dir().join("site-hook/samples/site.yaml")).await;
    let sites = run.crs("hooks.orkestra.io", "Site");
    run.status(&sites, "blog", |s| ready(s) && s["pageBytes"].is_number())
        .await;
    let mut calm = Vec::new();
    for i in 0..3 {
        calm.push(site_update(&run, &sites, &format!("calm {i}")).await);
    }

    let hostiles = run.crs("sandbox.orkestra.io", "Hostile");
    let cases = [
        (
            "spinner",
            "loop",
            "ComponentTimeout",
            "did not finish within its timeout of 500ms",
        ),
        (
            "hoarder",
            "memory",
            "ComponentMemoryLimit",
            "memory limit of 16777216 bytes",
        ),
        ("panicker", "panic", "ComponentTrapped", "guest panicked"),
        (
            "sleeper",
            "sleep",
            "ComponentTimeout",
            "did not finish within its timeout of 500ms",
        ),
        (
            "bloat",
            "oversized",
            "ComponentResultTooLarge",
            "resultSize limit is 65536",
        ),
        ("snoop", "forbidden", "ReadFailed", "namespaces: [kube-system]"),
        (
            "sneak",
            "forbidden-ignored",
            "ComponentForbidden",
            "get v1 Secret in namespace \"kube-system\"",
        ),
        (
            "climber",
            "forbidden-child",
            "ComponentForbidden",
            "apply rbac.authorization.k8s.io/v1 ClusterRole",
        ),
        ("diver", "recurse", "ComponentTrapped", "call stack exhausted"),
        // WASI 0.2's exit carries success or failure only: exit(3) arrives as status 1.
        ("quitter", "exit", "ComponentTrapped", "called exit with status 1"),
        (
            "nester",
            "deep-status",
            "ComponentBadResult",
            "recursion limit exceeded",
        ),
        (
            "shouter",
            "events",
            "ComponentLimitExceeded",
            "returned 100000 events; its limits.events is 10",
        ),
        (
            "breeder",
            "children",
            "ComponentLimitExceeded",
            "returned 1000 children; its limits.children is 100",
        ),
        ("rambler", "long-failure", "Verbose", "xxxxxxxx"),
    ];
    let configmaps: Api<ConfigMap> = Api::namespaced(run.ns.client.clone(), &run.ns.name);
    for (name, mode, _, _) in cases {
        run.create(&hostiles, "Hostile", name, json!({"mode": mode})).await;
    }
    run.create(&hostiles, "Hostile", "calm", json!({"mode": "ok"})).await;
    run.create(&hostiles, "Hostile", "chatter", json!({"mode": "logs"}))
        .await;
    let escapes = run.crs("sandbox.orkestra.io", "Escape");
    run.create(&escapes, "Escape", "out", json!({})).await;

    let stormed = run.counters("hostile").failures.load(Ordering::Relaxed);
    let site_reconciles = run.counters("site").reconciles.load(Ordering::Relaxed);
    let mut during = Vec::new();
    for i in 0..5 {
        during.push(site_update(&run, &sites, &format!("storm {i}")).await);
    }

    for (name, _, reason, detail) in cases {
        let status = run.status(&hostiles, name, not_ready_because(reason)).await;
        let message = condition(&status, "Ready")["message"].as_str().unwrap().to_string();
        assert!(message.contains(detail), "{name}: {message}");
    }
    run.create(&hostiles, "Hostile", "prober", json!({"mode": "probe"}))
        .await;
    let probed = run
        .status(&hostiles, "prober", |s| ready(s) && s["fs"].is_string())
        .await;
    assert!(
        probed["fs"].as_str().unwrap().starts_with("denied"),
        "no filesystem: {probed}"
    );
    assert!(
        probed["net"].as_str().unwrap().starts_with("denied"),
        "no network: {probed}"
    );
    assert_eq!(probed["env"], 0, "no environment");
    // Every message a guest wrote is bounded where the host records it.
    let rambled = run.status(&hostiles, "rambler", not_ready_because("Verbose")).await;
    assert!(condition(&rambled, "Ready")["message"].as_str().unwrap().len() <= 256);
    let rambler_key = format!("{}/rambler", run.ns.name);
    let failures = orkestra_test_support::logs::records(|r| {
        r.fields.get("key") == Some(&rambler_key) && r.fields.get("reason").is_some_and(|v| v == "Verbose")
    });
    assert!(!failures.is_empty(), "the failure is logged");
    assert!(
        failures.iter().all(|r| r.len() < 2048),
        "each log record of the 60 KB failure is bounded: {}",
        failures.iter().map(|r| r.len()).max().unwrap_or(0)
    );
    // A million empty log lines cost what the log budget allows, and one line saying so
    // (whether the guest gets through them all within its 500ms or not).
    run.status(&hostiles, "chatter", |s| !condition(s, "Ready").is_null())
        .await;
    let chatter_key = format!("{}/chatter", run.ns.name);
    let dropped = eventually("the line saying what was dropped", WAIT, || async {
        let dropped = orkestra_test_support::logs::records(|r| {
            r.fields.get("key") == Some(&chatter_key) && r.message.contains("were dropped")
        });
        (!dropped.is_empty()).then_some(dropped)
    })
    .await
    .unwrap();
    assert!(
        dropped
            .iter()
            .all(|r| r.fields["dropped"].parse::<u64>().unwrap_or(0) > 0),
        "one line per call says how many were dropped: {dropped:?}"
    );
    // Counted up to the last call that has said what it dropped: the CR's calls run one at a
    // time, and lines after that line are the next call's, still running.
    let said = |r: &orkestra_test_support::logs::Record| r.message.contains("were dropped");
    let mut chatter = orkestra_test_support::logs::records(|r| r.fields.get("key") == Some(&chatter_key));
    let finished = chatter.iter().rposition(said).expect("a call said what it dropped");
    chatter.truncate(finished + 1);
    let calls = chatter.iter().filter(|r| said(r)).count();
    let lines = chatter.iter().filter(|r| r.target == "guest").count();
    let per_call = lines / calls;
    println!("a million empty log lines: {calls} calls, {per_call} lines kept per call");
    // 64Ki of budget at no less than 96 bytes a line.
    assert!(
        (1..=700).contains(&per_call),
        "each call's lines stay within its 64Ki logBytes: {per_call}"
    );
    let calm_status = run.status(&hostiles, "calm", ready).await;
    assert_eq!(calm_status["mode"], "ok", "the same component serves well-behaved CRs");
    let escaped = run
        .status(&escapes, "out", not_ready_because("ComponentUnavailable"))
        .await;
    let message = condition(&escaped, "Ready")["message"].as_str().unwrap();
    assert!(message.contains("evil:host/escape"), "{message}");
    assert!(
        kubectl(&["get", "clusterrole", "escalate"]).is_err(),
        "a child outside the grants is never applied"
    );
    assert!(
        configmaps.get_opt("climber-note").await.unwrap().is_none(),
        "a denied child stops the granted ones returned with it"
    );
    assert!(
        configmaps.get_opt("flood-0").await.unwrap().is_none(),
        "a flood of children is refused whole, before anything is applied"
    );

    let failures = run.counters("hostile").failures.load(Ordering::Relaxed);
    let reconciled = run.counters("site").reconciles.load(Ordering::Relaxed) - site_reconciles;
    println!(
        "site updates, ms: before the hostile tenants {:?}, during {:?}; site reconciles during: {reconciled}; hostile failures during: {}",
        calm.iter().map(Duration::as_millis).collect::<Vec<_>>(),
        during.iter().map(Duration::as_millis).collect::<Vec<_>>(),
        failures - stormed
    );
    assert!(reconciled >= 5, "every site update was reconciled ({reconciled})");
    assert!(failures > stormed, "the hostile CRs kept failing meanwhile");
    assert!(
        during.iter().all(|d| *d < Duration::from_secs(10)),
        "the well-behaved tenant kept reconciling: {during:?}"
    );
    run.stop().await;
}

#[tokio::test]
async fn components_swap_live_and_a_bad_version_leaves_the_old_one_serving() {
    let rust_hook = guests::component("rust-hook").unwrap();
    let hostile = guests::component("hostile").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("hook.wasm");
    std::fs::copy(&rust_hook, &live).unwrap();
    let katalog_text = std::fs::read_to_string(katalogs_dir().join("site-hook/katalog.yaml"))
        .unwrap()
        .replace(
            "../../examples/target/wasm32-wasip2/release/rust_hook.wasm",
            "hook.wasm",
        );
    let katalog_file = dir.path().join("katalog.yaml");
    std::fs::write(&katalog_file, &katalog_text).unwrap();
    let run = Running::start("swap", std::slice::from_ref(&katalog_file), &[]).await;
    let reloader = orkestra::runtime::reload::Reloader::new(
        vec![katalog_file.clone()],
        run.components.clone(),
        run.pipelines.clone(),
    );
    let watcher = tokio::spawn(reloader.clone().watch(orkestra::runtime::COMPONENT_POLL));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = listener.local_addr().unwrap();
    let router = orkestra::live::router(run.inspect.clone(), Some(reloader), orkestra::live::Auth::open());
    let endpoint = tokio::spawn(async move { axum::serve(listener, router).await });
    run.apply(&katalogs_dir().join("site-hook/samples/site.yaml")).await;
    let sites = run.crs("hooks.orkestra.io", "Site");
    run.status(&sites, "blog", |s| ready(s) && s["renderedBy"] == "rust-hook")
        .await;

    // A new file: the CR reconciles on the new version without a restart or an event.
    let digest = sha256(&std::fs::read(&hostile).unwrap())[..12].to_string();
    std::fs::copy(&hostile, dir.path().join("next.wasm")).unwrap();
    std::fs::rename(dir.path().join("next.wasm"), &live).unwrap();
    let swapped = run
        .status(&sites, "blog", |s| {
            s["mode"] == "ok"
                && condition(s, "Component")["message"]
                    .as_str()
                    .is_some_and(|m| m == format!("site (sha256 {digest}) serves"))
        })
        .await;
    assert!(ready(&swapped));

    // A broken file: the second version keeps serving, and the CR, the log and the endpoint
    // say why.
    std::fs::write(dir.path().join("next.wasm"), b"not a component").unwrap();
    std::fs::rename(dir.path().join("next.wasm"), &live).unwrap();
    let refused = run
        .status(&sites, "blog", |s| {
            condition(s, "Component")["reason"] == "UpdateFailed"
        })
        .await;
    let message = condition(&refused, "Component")["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("sha256 {digest} keeps serving")) && message.contains("not a valid component"),
        "{message}"
    );
    assert!(ready(&refused), "the old version keeps reconciling");
    let site = listed_component(&admin.to_string(), "site").await;
    assert_eq!(site["revision"], 2);
    assert!(
        site["lastError"].as_str().unwrap().contains("not a valid component"),
        "{site}"
    );
    // Where the calls' time went, phase by phase, on the endpoint and in the metrics.
    for phase in ["instantiate", "run", "teardown"] {
        let p50 = site["calls"]["phasesP50Ms"][phase].as_f64();
        assert!(p50.is_some_and(|ms| ms > 0.0 && ms < 10_000.0), "{phase}: {site}");
    }
    let metrics = reqwest::get(format!("http://{admin}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let run_count = r#"orkestra_wasm_call_phase_duration_seconds_count{component="site",phase="run"} "#;
    let counted = metrics.lines().find_map(|l| l.strip_prefix(run_count));
    assert!(
        counted.and_then(|n| n.parse::<u64>().ok()).is_some_and(|n| n > 0),
        "{metrics}"
    );

    // `ork reload` after the file is fixed.
    std::fs::copy(&rust_hook, &live).unwrap();
    // tokio's Command: the endpoint answering it runs on this test's runtime.
    let output = tokio::process::Command::new(ORK)
        .args(["reload", "--http-addr", &admin.to_string(), "--component", "site"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("site: revision"), "{stdout}");
    let unknown = tokio::process::Command::new(ORK)
        .args(["reload", "--http-addr", &admin.to_string(), "--component", "nope"])
        .output()
        .await
        .unwrap();
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no component named \"nope\""));
    run.status(&sites, "blog", |s| {
        ready(s) && condition(s, "Component")["reason"] == "Serving"
    })
    .await;

    // A Katalog change re-declares the component: new arguments reach the next page.
    std::fs::write(
        &katalog_file,
        katalog_text.replace("greeting: Hello", "greeting: Howdy"),
    )
    .unwrap();
    eventually("the new greeting", WAIT, || async {
        page(&run.ns, "blog-content")
            .await
            .contains("<h1>Howdy: ")
            .then_some(())
    })
    .await
    .unwrap();
    watcher.abort();
    endpoint.abort();
    run.stop().await;
}

#[tokio::test]
async fn a_component_from_a_url_loads_only_with_its_pin() {
    let path = guests::component("rust-hook").unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let digest = sha256(&bytes);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/hook.wasm", axum::routing::get(move || async move { bytes }));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let cache = tempfile::tempdir().unwrap();
    let host = orkestra_wasm::WasmHost::new(None, reqwest::Client::new(), cache.path().join("wasm")).unwrap();
    let spec = |pin: &str| hook_spec(&format!("http://{addr}/hook.wasm"), Some(pin)).unwrap();
    let loaded = host.load(&spec(&digest)).await.unwrap();
    assert_eq!(loaded.digest, digest);
    let wrong = "0".repeat(64);
    let refused = host.load(&spec(&wrong)).await.err().unwrap();
    assert!(
        refused
            .cause
            .to_string()
            .contains(&format!("sha256 is {digest}, but the Katalog pins {wrong}")),
        "{refused}"
    );
    let missing = orkestra_wasm::Spec {
        source: orkestra_wasm::Source::Url(format!("http://{addr}/nothing.wasm")),
        ..spec(&digest)
    };
    let refused = host.load(&missing).await.err().unwrap();
    assert!(
        matches!(refused.cause, orkestra_wasm::LoadCause::Fetch(_))
            && std::error::Error::source(&refused.cause).is_some(),
        "a failed fetch keeps the HTTP error as its source: {refused:?}"
    );
    assert!(
        refused.cause.to_string().contains("cannot fetch it") && refused.cause.to_string().contains("404"),
        "{refused}"
    );
    // A component of the other world is refused by name.
    let constructor = orkestra_wasm::Spec {
        world: orkestra_wasm::World::Constructor,
        ..spec(&digest)
    };
    let refused = host.load(&constructor).await.err().unwrap();
    assert!(
        refused
            .cause
            .to_string()
            .contains("does not implement the constructor world"),
        "{refused}"
    );
    server.abort();
}

#[tokio::test]
async fn a_call_in_flight_finishes_on_the_version_it_started_on() {
    let slow = guests::component("hostile").unwrap();
    let echo = guests::component("echo-hook").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("hook.wasm");
    std::fs::copy(&slow, &live).unwrap();
    let host = orkestra_wasm::WasmHost::new(None, reqwest::Client::new(), dir.path().join("cache")).unwrap();
    let spec = hook_spec(live.to_str().unwrap(), None).unwrap();
    let components = Components::default();
    let slot = components.add("swap", &host, std::sync::Arc::new(spec));
    slot.reload().await.unwrap();
    let request = orkestra_wasm::Request {
        key: "ns/a".into(),
        gvk: orkestra_wasm::Gvk {
            group: "a.io".into(),
            version: "v1".into(),
            kind: "A".into(),
        },
        target: None,
        object: Some(json!({"metadata": {"name": "a"}, "spec": {"mode": "slow"}}).to_string()),
        event_id: None,
        sentinels: vec![],
        context: "{}".into(),
    };
    let caller = || orkestra_wasm::Caller {
        component: "swap".into(),
        key: "ns/a".into(),
        namespace: Some("ns".into()),
        manager: "orkestra-wasm/test".into(),
        client: None,
        owner_uid: None,
        writes: Default::default(),
    };
    let call = |active: std::sync::Arc<orkestra_wasm::Active>| {
        let (slot, request) = (slot.clone(), request.clone());
        async move {
            let response = slot
                .call(&active, orkestra_wasm::Hook::Reconcile, caller(), &request)
                .await
                .unwrap()
                .unwrap();
            serde_json::from_str::<Value>(response.status.as_deref().unwrap()).unwrap()
        }
    };
    let in_flight = tokio::spawn(call(slot.active().unwrap()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::fs::copy(&echo, &live).unwrap();
    slot.reload().await.unwrap();
    assert_eq!(slot.active().unwrap().revision, 2);
    let after = call(slot.active().unwrap()).await;
    assert_eq!(after, json!({"mode": "slow"}), "new calls run the new version");
    let old = in_flight.await.unwrap();
    assert_eq!(
        old["slept"], 300,
        "the call that started on revision 1 finished on it: {old}"
    );

    // on-not-found gets no object; a constructor has no such export and is not called.
    let not_found = orkestra_wasm::Request {
        object: None,
        ..request.clone()
    };
    let active = slot.active().unwrap();
    let response = slot
        .call(&active, orkestra_wasm::Hook::NotFound, caller(), &not_found)
        .await
        .unwrap();
    assert!(matches!(response.map(|r| r.outcome), Some(orkestra_wasm::Outcome::Ok)));
    // Every call counted on the slot, across its swap.
    let calls = slot.stats.view();
    assert_eq!((calls.calls, calls.outcomes["ok"]), (3, 3), "{calls:?}");
    assert!(
        calls.p99_ms.unwrap() >= 300.0,
        "the slow call is the slowest: {calls:?}"
    );
    assert!(calls.memory_high_water_bytes > 0);
    assert_eq!(calls.swaps.iter().map(|s| s.revision).collect::<Vec<_>>(), [1, 2]);
}

/// The hostile component loaded in a slot of each of `names`, on a host of its own.
async fn hostile_slots(names: &[&str]) -> (Arc<orkestra_wasm::WasmHost>, tempfile::TempDir, Vec<Arc<Slot>>) {
    let path = guests::component("hostile").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let host = orkestra_wasm::WasmHost::new(None, reqwest::Client::new(), cache.path().to_path_buf()).unwrap();
    let spec = Arc::new(guests::hook_spec(path.to_str().unwrap(), None).unwrap());
    let components = Components::default();
    let mut slots = Vec::new();
    for name in names {
        let slot = components.add(name, &host, spec.clone());
        slot.reload().await.unwrap();
        slots.push(slot);
    }
    (host, cache, slots)
}

/// A reconcile call of `slot` for the CR `key`, in the hostile component's `mode`.
async fn hostile_call(slot: Arc<Slot>, key: String, mode: &'static str) -> Result<(), orkestra_wasm::CallError> {
    let active = slot.active().unwrap();
    let caller = crate::warm::caller(&slot.name, &key);
    let request = crate::warm::request(&key, mode);
    slot.call(&active, orkestra_wasm::Hook::Reconcile, caller, &request)
        .await
        .map(drop)
}

/// Issue 37: one component's flood of calls holds at most half the host's calls at once, so
/// another component's call is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_components_flood_of_calls_leaves_room_for_another_components_call() {
    let (_host, _cache, slots) = hostile_slots(&["noisy", "quiet"]).await;
    let (noisy, quiet) = (&slots[0], &slots[1]);
    // Twice as many 300 ms calls as the host runs at once, over enough namespaces that no
    // namespace's share holds them back before the component's share does.
    let flood: Vec<_> = (0..orkestra_wasm::MAX_CONCURRENT_CALLS * 2)
        .map(|i| tokio::spawn(hostile_call(noisy.clone(), format!("noisy-{}/{i}", i % 8), "slow")))
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    hostile_call(quiet.clone(), "quiet/1".into(), "recall").await.unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(150),
        "the quiet component's call waited {took:?} behind the flood's 300 ms calls"
    );
    const { assert!(orkestra_wasm::SLOT_CALLS < orkestra_wasm::MAX_CONCURRENT_CALLS) };
    for call in flood {
        call.await.unwrap().unwrap();
    }
}

/// Issue 37, shares of the Wasm host: one namespace's flood of calls of a component holds
/// at most its share (`spec.tenants.wasmCalls`, 16 by default) of the host's calls, so a
/// call of another namespace, of the same component, is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_namespaces_flood_of_calls_leaves_room_for_another_namespaces_call() {
    let (host, _cache, slots) = hostile_slots(&["shared"]).await;
    let shared = &slots[0];
    // As many 300 ms calls as the component may run at once, all of one namespace.
    let flood: Vec<_> = (0..orkestra_wasm::SLOT_CALLS)
        .map(|i| tokio::spawn(hostile_call(shared.clone(), format!("noisy/{i}"), "slow")))
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let share = orkestra_katalog::compile::DEFAULT_WASM_CALLS;
    assert_eq!(
        host.tenant_calls(),
        [("noisy".to_string(), share)],
        "its share, no more"
    );
    let started = Instant::now();
    hostile_call(shared.clone(), "quiet/1".into(), "recall").await.unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(150),
        "the quiet namespace's call waited {took:?} behind the flood's 300 ms calls"
    );
    const { assert!(orkestra_katalog::compile::DEFAULT_WASM_CALLS < orkestra_wasm::SLOT_CALLS) };
    for call in flood {
        call.await.unwrap().unwrap();
    }
}
