//! Progressive rollout of a new component version, on `ork run` against the real API server:
//! the new version serves its share of the CRs (the same CRs the stable hash names), every CR
//! once promoted; a failing one is rolled back to the last good version by its error percent
//! and not rolled out again. Each step shows on the CRs (their Component condition and
//! Events), on the Live API and on the Control Center's Components page.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use orkestra_test_support::{TestNamespace, eventually, guests, namespace};
use serde_json::{Value, json};

use crate::pipeline::WAIT;
use crate::replay::{Host, create, create_in, run_katalog};

/// `Site`, whose hook is the file `component`, rolled out as `rollout` says.
fn katalog(ns: &TestNamespace, component: &Path, rollout: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {}}}
spec:
  crds:
    site:
      apiTypes: {{group: {}.replay.orkestra.io, version: v1, kind: Site}}
      operatorBox:
        reconcile:
          hooks:
            component: {}
            args: {{greeting: Hello}}
            capabilities:
              - {{apiVersion: v1, kinds: [ConfigMap], verbs: [get, apply]}}
            rollout: {rollout}
",
        // Named apart: each test's rollouts are kept in a ConfigMap of their own.
        ns.name,
        ns.name,
        component.display()
    )
}

/// Puts `example`'s component at `file` whole (a watcher never reads half of it).
fn install(example: &str, file: &Path) -> String {
    let bytes = std::fs::read(guests::component(example).unwrap()).unwrap();
    let next = file.with_extension("next");
    std::fs::write(&next, &bytes).unwrap();
    std::fs::rename(&next, file).unwrap();
    crate::wasm::sha256(&bytes)
}

/// Names of Sites, two the share takes and two it leaves.
fn names(ns: &TestNamespace, share: u32) -> (Vec<String>, Vec<String>) {
    names_where(ns, share, |_| true)
}

/// Names of Sites, two the share takes (each of them one that `taken` accepts) and two it
/// leaves.
fn names_where(ns: &TestNamespace, share: u32, taken_ok: impl Fn(&str) -> bool) -> (Vec<String>, Vec<String>) {
    let (mut taken, mut left) = (Vec::new(), Vec::new());
    for i in 0.. {
        let name = format!("s{i}");
        let key = format!("{}/{name}", ns.name);
        match orkestra_wasm::rollout::in_share(&key, share) && taken_ok(&key) {
            true if taken.len() < 2 => taken.push(name),
            false if left.len() < 2 => left.push(name),
            _ => {}
        }
        if taken.len() == 2 && left.len() == 2 {
            return (taken, left);
        }
    }
    unreachable!()
}

/// The Sites' resource, by its group: another test's Sites may be served too.
fn sites(ns: &TestNamespace) -> String {
    format!("sites.{}.replay.orkestra.io", ns.name)
}

/// The reason and message of Site `name`'s Component condition.
async fn component_condition(ns: &TestNamespace, name: &str) -> Option<(String, String)> {
    let text = orkestra_test_support::kubectl(&["get", &sites(ns), "-n", &ns.name, name, "-o", "json"]).ok()?;
    let site: Value = serde_json::from_str(&text).ok()?;
    let condition = site["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Component")?
        .clone();
    Some((
        condition["reason"].as_str()?.to_string(),
        condition["message"].as_str()?.to_string(),
    ))
}

/// Waits until every Site of `names` has a Component condition of `reason` naming `digest`.
async fn served(ns: &TestNamespace, names: &[String], reason: &str, digest: &str) {
    served_within(ns, names, (reason, digest), WAIT, &[]).await;
}

/// As [`served`], within `wait`; a timeout also says what each of `replicas` holds of the
/// slot (which version serves, the rollout it is in, what it refused) and of its share.
async fn served_within(
    ns: &TestNamespace,
    names: &[String],
    (reason, digest): (&str, &str),
    wait: Duration,
    replicas: &[&Host],
) {
    let short = &digest[..12];
    for name in names {
        let waited = eventually(&format!("{name}: {reason} by {short}"), wait, || async {
            let (found, message) = component_condition(ns, name).await?;
            (found == reason && message.contains(short)).then_some(())
        })
        .await;
        if let Err(error) = waited {
            let site = orkestra_test_support::kubectl(&["get", &sites(ns), "-n", &ns.name, name, "-o", "yaml"]);
            let mut views = Vec::new();
            for replica in replicas {
                let ha = live_katalog(replica).await.map(|k| k["ha"].clone());
                views.push(format!("{} {ha:?}", site_component(replica).await));
            }
            panic!("{error}; the Site: {site:?}; the replicas' site component: {views:?}");
        }
    }
}

/// Reasons and notes of the Events about Site `name`.
async fn events(ns: &TestNamespace, name: &str) -> Vec<(String, String, String)> {
    let events: Api<Event> = Api::namespaced(ns.client.clone(), &ns.name);
    let params = ListParams::default().fields(&format!("regarding.name={name}"));
    let list = events.list(&params).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

async fn told(ns: &TestNamespace, name: &str, kind: &str, reason: &str) -> String {
    eventually(&format!("a {reason} event on {name}"), WAIT, || async {
        let found = events(ns, name).await;
        found
            .into_iter()
            .find(|(k, r, _)| k == kind && r == reason)
            .map(|(_, _, note)| note)
    })
    .await
    .unwrap()
}

async fn site_component(host: &Host) -> Value {
    crate::wasm::listed_component(host.url.trim_start_matches("http://"), "site").await
}

async fn reload(host: &Host) {
    let response = reqwest::Client::new()
        .post(format!("{}/reload?component=site", host.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200, "{}", response.text().await.unwrap());
}

/// The Control Center's Components page for the runtime at `url`.
async fn control_center_page(url: &str) -> String {
    let options = orkestra_control_center::Options {
        addr: "127.0.0.1:0".parse().unwrap(),
        runtimes: vec![orkestra_control_center::config::RuntimeConfig::new(url, Some("sites"), None).unwrap()],
        config_file: None,
        tokens: Default::default(),
        login: orkestra_control_center::login::Login::none(),
        hosts: Vec::new(),
        poll: std::time::Duration::from_millis(200),
        discovered: None,
        gateways: Vec::new(),
    };
    let cc = crate::control_center::serve(options).await;
    eventually("the Components page with the rollout", WAIT, || async {
        let page = reqwest::get(format!("{cc}/r/sites/components"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        page.contains("rolling out").then_some(page)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_new_version_serves_its_share_of_the_crs_first_then_every_cr_once_promoted() {
    let ns = namespace("rollout").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("site.wasm");
    let stable = install("rust-hook", &file);
    let rollout = "{share: 50, promoteAfter: 10s, maxErrorPercent: 20, minReconciles: 3}";
    let host = run_katalog(&ns, katalog(&ns, &file, rollout), &[]).await;
    let (taken, left) = names(&ns, 50);
    let all: Vec<String> = taken.iter().chain(&left).cloned().collect();
    for name in &all {
        create(&ns, "Site", name, json!({"title": name})).await;
    }
    served(&ns, &all, "Serving", &stable).await;

    let next = install("echo-hook", &file);
    reload(&host).await;
    // Its share on the new version, the rest where they were.
    served(&ns, &taken, "Canary", &next).await;
    served(&ns, &left, "Serving", &stable).await;
    let note = told(&ns, &taken[0], "Normal", "ComponentCanary").await;
    assert!(
        note.contains(&format!(
            "sha256 {} serves this CR (was {})",
            &next[..12],
            &stable[..12]
        )),
        "{note}"
    );
    let site = site_component(&host).await;
    let rollout = &site["rollout"];
    assert_eq!(rollout["canary"]["digest"], next.as_str(), "{site}");
    assert_eq!(rollout["policy"]["share"], 50);
    assert_eq!(
        site["digest"],
        stable.as_str(),
        "the stable version is still the slot's"
    );
    let page = control_center_page(&host.url).await;
    assert!(page.contains(&format!("sha256 {}", &next[..12])), "{page}");

    // After its period, with none of its reconciles failed: every CR on it.
    served(&ns, &all, "Serving", &next).await;
    let note = told(&ns, &left[0], "Normal", "ComponentPromoted").await;
    assert!(note.contains("promoted"), "{note}");
    let site = site_component(&host).await;
    assert_eq!(site["digest"], next.as_str());
    assert!(site["rollout"]["canary"].is_null(), "{site}");
    let steps: Vec<&str> = site["rollout"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["started", "promoted"]);
}

/// Sites in a rollout's 50% share and left out of it, created served by `stable`: the rust
/// hook renders any Site, the hostile one panics on each of them.
async fn panicking_sites(ns: &TestNamespace, stable: &str) -> (Vec<String>, Vec<String>) {
    panicking_sites_of(ns, stable, names(ns, 50)).await
}

async fn panicking_sites_of(
    ns: &TestNamespace,
    stable: &str,
    (taken, left): (Vec<String>, Vec<String>),
) -> (Vec<String>, Vec<String>) {
    let all: Vec<String> = taken.iter().chain(&left).cloned().collect();
    for name in &all {
        create(ns, "Site", name, json!({"title": name, "mode": "panic"})).await;
    }
    served(ns, &all, "Serving", stable).await;
    (taken, left)
}

/// Sites on a good version, then a failing one rolled out and rolled back.
struct RolledBack {
    ns: TestNamespace,
    _dir: tempfile::TempDir,
    /// The component file (holding the failing version) and the Katalog's text.
    file: std::path::PathBuf,
    text: String,
    host: Host,
    stable: String,
    failing: String,
    /// Sites in the share and left out of it.
    taken: Vec<String>,
    left: Vec<String>,
}

impl RolledBack {
    async fn start(prefix: &str) -> Self {
        let ns = namespace(prefix).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("site.wasm");
        let stable = install("rust-hook", &file);
        let rollout = "{share: 50, promoteAfter: 10m, maxErrorPercent: 20, minReconciles: 3}";
        let text = katalog(&ns, &file, rollout);
        let host = run_katalog(&ns, text.clone(), &[]).await;
        let (taken, left) = panicking_sites(&ns, &stable).await;
        let all: Vec<String> = taken.iter().chain(&left).cloned().collect();
        let failing = install("hostile", &file);
        reload(&host).await;
        // Its reconciles fail; past 20% of 3, every CR is back on the last good version.
        served(&ns, &all, "RolledBack", &stable).await;
        Self {
            ns,
            _dir: dir,
            file,
            text,
            host,
            stable,
            failing,
            taken,
            left,
        }
    }
}

#[tokio::test]
async fn a_failing_version_is_rolled_back_by_its_error_percent_and_not_rolled_out_again() {
    // `_dir` keeps the component's folder while the runtime reads it.
    let RolledBack {
        ns,
        _dir,
        host,
        stable,
        failing,
        taken,
        left,
        ..
    } = RolledBack::start("rollback").await;
    let all: Vec<String> = taken.iter().chain(&left).cloned().collect();
    let note = told(&ns, &taken[0], "Warning", "ComponentRolledBack").await;
    assert!(
        note.contains(&format!(
            "sha256 {} serves this CR (was {})",
            &stable[..12],
            &failing[..12]
        )),
        "{note}"
    );
    assert!(note.contains("more than rollout.maxErrorPercent 20"), "{note}");
    let (_, message) = component_condition(&ns, &left[0]).await.unwrap();
    assert!(message.contains("was rolled back"), "{message}");
    let site = site_component(&host).await;
    assert_eq!(site["digest"], stable.as_str());
    assert_eq!(site["rollout"]["refused"], failing.as_str());
    let last = site["rollout"]["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["step"], "rolled-back", "{site}");
    assert_eq!(last["digest"], failing.as_str());

    // The same version declared again is not rolled out again, and nothing is left to end.
    let steps = site["rollout"]["history"].as_array().unwrap().len();
    reload(&host).await;
    let site = site_component(&host).await;
    assert!(site["rollout"]["canary"].is_null(), "{site}");
    assert_eq!(site["rollout"]["history"].as_array().unwrap().len(), steps, "{site}");
    let ended = promote(&host.url).await;
    assert_eq!(ended.status().as_u16(), 409);
    // Every CR still reconciles, on the good version.
    let resource = sites(&ns);
    for name in &all {
        let ready = orkestra_test_support::kubectl(&[
            "get",
            &resource,
            "-n",
            &ns.name,
            name,
            "-o",
            "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
        ])
        .unwrap();
        assert_eq!(ready, "True", "{name}");
    }
}

/// Issue 49, finding 10: one tenant's CRs failing for their own reasons counted against a
/// canary, and the version was rolled back for every tenant. A canary is judged per tenant:
/// rolled back only when it fails in most of the tenants it serves.
#[tokio::test]
async fn one_tenants_failing_crs_do_not_roll_a_canary_back_for_the_others() {
    let ns = namespace("rollout-tenants").await.unwrap();
    let hostile_ns = namespace("rollout-noisy").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("site.wasm");
    let stable = install("echo-hook", &file);
    let rollout = "{share: 99, promoteAfter: 15s, maxErrorPercent: 20, minReconciles: 3}";
    let host = run_katalog(&ns, katalog(&ns, &file, rollout), &[]).await;
    // CRs the canary's share takes, in each tenant.
    let taken = |namespace: &str, prefix: &str, count: usize| -> Vec<String> {
        (0..)
            .map(|i| format!("{prefix}-{i}"))
            .filter(|name| orkestra_wasm::rollout::in_share(&format!("{namespace}/{name}"), 99))
            .take(count)
            .collect()
    };
    let good = taken(&ns.name, "good", 3);
    for name in &good {
        create(&ns, "Site", name, json!({"title": name})).await;
    }
    // The noisy tenant's CRs ask for what the new version refuses (its error answer).
    let noisy = taken(&hostile_ns.name, "noisy", 6);
    for name in &noisy {
        create_in(
            &ns,
            &hostile_ns.name,
            "Site",
            name,
            json!({"title": name, "mode": "long-failure"}),
        )
        .await;
    }
    served(&ns, &good, "Serving", &stable).await;

    let next = install("hostile", &file);
    reload(&host).await;
    served(&ns, &good, "Canary", &next).await;
    // Every noisy CR fails on it, many times over the period: still not rolled back.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let site = site_component(&host).await;
    let canary = &site["rollout"]["canary"];
    assert!(!canary.is_null(), "still rolling out: {site}");
    assert!(canary["failed"].as_u64().unwrap() >= 6, "{site}");
    assert_eq!(canary["tenants"], 2, "{site}");
    // And promoted at the end of its period.
    served(&ns, &good, "Serving", &next).await;
    let site = site_component(&host).await;
    let steps: Vec<&str> = site["rollout"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["started", "promoted"], "{site}");
}

/// The rollout state kept for Site's component, as `kubectl` shows it.
fn kept_state(ns: &TestNamespace) -> Value {
    let map = format!("orkestra-rollouts-{}", ns.name);
    let text =
        orkestra_test_support::kubectl(&["get", "configmap", &map, "-n", "default", "-o", "jsonpath={.data.site}"])
            .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// Changes Site `name`'s title and waits until a reconcile of that change made it Ready.
async fn changed_and_ready(ns: &TestNamespace, name: &str, title: &str) {
    let resource = sites(ns);
    let patch = json!({"spec": {"title": title}}).to_string();
    orkestra_test_support::kubectl(&[
        "patch", &resource, "-n", &ns.name, name, "--type", "merge", "-p", &patch,
    ])
    .unwrap();
    let waited = eventually(&format!("{name} reconciled after the change"), WAIT, || async {
        let text = orkestra_test_support::kubectl(&["get", &resource, "-n", &ns.name, name, "-o", "json"]).ok()?;
        let site: Value = serde_json::from_str(&text).ok()?;
        let ready = site["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        (ready && site["status"]["observedGeneration"] == site["metadata"]["generation"]).then_some(())
    })
    .await;
    if let Err(error) = waited {
        let site = orkestra_test_support::kubectl(&["get", &resource, "-n", &ns.name, name, "-o", "yaml"]);
        panic!("{error}; the Site: {site:?}");
    }
}

/// Issue 50: a restart served a version rolled back to every CR, with no canary. What a
/// rollout decided is kept in the cluster (a ConfigMap `kubectl` reads) and read back at
/// start: killed with SIGKILL and started again on the same files, the runtime keeps the
/// failing version refused and serves the last good one, and a canary goes on with its share
/// and the rest of its period.
#[tokio::test]
async fn a_restart_keeps_a_rolled_back_version_refused_and_resumes_a_canary_where_it_was() {
    let RolledBack {
        ns,
        _dir,
        file,
        text,
        host,
        stable,
        failing,
        taken,
        left,
    } = RolledBack::start("rollout-restart").await;
    let all: Vec<String> = taken.iter().chain(&left).cloned().collect();
    let kept = eventually("the rollback kept in the cluster", WAIT, || async {
        let kept = kept_state(&ns);
        (kept["refused"][0]["digest"] == failing.as_str()).then_some(kept)
    })
    .await
    .unwrap();
    assert_eq!(kept["stable"]["digest"], stable.as_str(), "{kept}");
    let reason = kept["refused"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("more than rollout.maxErrorPercent 20"), "{kept}");

    // Killed, and started again on the same files: the file still holds the failing version.
    drop(host);
    let host = run_katalog(&ns, text.clone(), &[]).await;
    let site = site_component(&host).await;
    assert_eq!(site["digest"], stable.as_str(), "the last good version serves: {site}");
    assert_eq!(site["rollout"]["refused"], failing.as_str(), "{site}");
    assert!(site["rollout"]["canary"].is_null(), "{site}");
    assert!(
        site["lastError"].as_str().unwrap().contains("was rolled back"),
        "{site}"
    );
    // Every CR reconciles on it (the failing version panics on each of them).
    for name in &all {
        changed_and_ready(&ns, name, "after the restart").await;
    }

    // A new version rolls out; the runtime is killed halfway through its period.
    let next = install("echo-hook", &file);
    reload(&host).await;
    served(&ns, &taken, "Canary", &next).await;
    let before = site_component(&host).await["rollout"]["canary"].clone();
    eventually("the canary kept in the cluster", WAIT, || async {
        (kept_state(&ns)["canary"]["digest"] == next.as_str()).then_some(())
    })
    .await
    .unwrap();
    drop(host);
    let host = run_katalog(&ns, text, &[]).await;
    let site = site_component(&host).await;
    let canary = &site["rollout"]["canary"];
    assert_eq!(canary["digest"], next.as_str(), "the canary goes on: {site}");
    assert_eq!(canary["startedAt"], before["startedAt"], "from when it started: {site}");
    assert!(
        canary["promotesInMs"].as_u64().unwrap() <= before["promotesInMs"].as_u64().unwrap(),
        "its period runs on: {before} then {canary}"
    );
    assert_eq!(
        site["digest"],
        stable.as_str(),
        "the rest stay on the last good version"
    );
    changed_and_ready(&ns, &taken[0], "on the canary").await;
    served(&ns, &taken[..1], "Canary", &next).await;
    changed_and_ready(&ns, &left[0], "on the stable").await;
    served(&ns, &left[..1], "Serving", &stable).await;
}

/// Issue 50: a take-over must not serve a version the leader rolled back. The replica that
/// stands by loads each new version too, but only the leader judges it; the standby follows
/// the state the leader keeps, so when the leader is killed it carries on with the last good
/// version and the failing one refused.
#[tokio::test]
async fn a_standby_follows_the_leaders_rollback_and_keeps_it_after_taking_over() {
    a_rollback_holds_on_every_replica_and_after_one_is_killed("leader").await;
}

/// The same in shard mode: both members reconcile a share, one of them decides the
/// rollouts and the other follows, so the rollback holds on every CR, and once a member is
/// killed the other carries every CR on the last good version.
#[tokio::test]
async fn shard_members_keep_one_rollback_and_the_survivor_carries_it() {
    a_rollback_holds_on_every_replica_and_after_one_is_killed("shard").await;
}

async fn a_rollback_holds_on_every_replica_and_after_one_is_killed(mode: &str) {
    let ns = namespace(&format!("rollout-{mode}")).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("site.wasm");
    let stable = install("rust-hook", &file);
    let rollout = "{share: 50, promoteAfter: 10m, maxErrorPercent: 20, minReconciles: 3}";
    let text = katalog(&ns, &file, rollout);
    let replica = |identity: &str| -> Vec<String> {
        ["--ha", mode, "--lease-namespace", &ns.name, "--identity", identity]
            .map(String::from)
            .to_vec()
    };
    let first = run_katalog(&ns, text.clone(), &replica("one")).await;
    eventually("the first replica reconciling", WAIT, || async {
        (live_katalog(&first).await?["isKonductor"] == true).then_some(())
    })
    .await
    .unwrap();
    let second = run_katalog(&ns, text, &replica("two")).await;
    let names = match mode {
        // The canary's CRs all on the member that does not decide: the one that does sees
        // none of their failures but through the other's counts.
        "shard" => {
            let ring = orkestra::ha::ring::Ring::new(["one".to_string(), "two".to_string()]);
            let decider = orkestra::ha::ownership::rollouts_decider(&ring).unwrap().to_string();
            for (replica, identity) in [(&first, "one"), (&second, "two")] {
                let ha = eventually("both members settled", WAIT, || async {
                    let katalog = live_katalog(replica).await?;
                    let ha = &katalog["ha"];
                    (ha["settled"] == true && ha["members"].as_array()?.len() == 2).then(|| ha.clone())
                })
                .await
                .unwrap();
                assert_eq!(ha["decidesRollouts"], identity == decider, "{identity}: {ha}");
            }
            names_where(&ns, 50, |key| {
                orkestra::ha::ownership::owner_in(&ring, "site", key) != Some(decider.as_str())
            })
        }
        _ => names(&ns, 50),
    };
    let (taken, left) = panicking_sites_of(&ns, &stable, names).await;
    let all: Vec<String> = taken.iter().chain(&left).cloned().collect();

    // Both replicas load the failing version; the one that decides rolls it back, and every
    // CR (in shard mode, each member's share) says so.
    let failing = install("hostile", &file);
    // The failures reach the replica that decides through two Lease periods (published at a
    // renewal, read at its next look), and the decision reaches the other through a watch:
    // twice the wait of one runtime.
    served_within(&ns, &all, ("RolledBack", &stable), 2 * WAIT, &[&first, &second]).await;
    for replica in [&first, &second] {
        let followed = eventually("each replica on the rollback", WAIT, || async {
            let site = site_component(replica).await;
            (site["rollout"]["refused"] == failing.as_str() && site["rollout"]["canary"].is_null()).then_some(site)
        })
        .await
        .unwrap();
        assert_eq!(followed["digest"], stable.as_str(), "{followed}");
    }
    if mode == "leader" {
        // Standing by, it decides nothing.
        let refused = promote(&second.url).await;
        assert_eq!(refused.status().as_u16(), 409, "{}", refused.text().await.unwrap());
    }

    // The first killed: the other carries every CR on the good version.
    drop(first);
    for name in &all {
        changed_and_ready(&ns, name, "after the take-over").await;
    }
    let site = site_component(&second).await;
    assert_eq!(site["digest"], stable.as_str(), "{site}");
    assert!(site["rollout"]["canary"].is_null(), "{site}");
}

/// What `host`'s Live API says of its Katalog.
async fn live_katalog(host: &Host) -> Option<Value> {
    reqwest::get(format!("{}/katalog", host.url))
        .await
        .ok()?
        .json()
        .await
        .ok()
}

/// Asks the runtime at `url` to promote the site component's canary.
async fn promote(url: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/rollouts"))
        .json(&json!({"component": "site", "action": "promote"}))
        .send()
        .await
        .unwrap()
}
