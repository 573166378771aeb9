//! Replicas of one Katalog sharing its CRs over Leases, run as a platform team runs them:
//! several `ork run --ha ...` processes against the real API server. Each test ends with
//! every CR converged (its ConfigMap holds what its spec asks, its status observed the
//! latest generation) and, while the replicas are settled, every CR owned by exactly one.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_test_support::{TestNamespace, eventually, namespace};
use serde_json::{Value, json};

use crate::ork::Ork;
use crate::pipeline::WAIT;

/// Short Leases keep the tests quick; the defaults (10 s / 2 s) are what the benchmark uses.
const LEASE: &str = "4s";
const RENEW: &str = "1s";

pub(crate) struct Replicas {
    pub(crate) ns: TestNamespace,
    pub(crate) dir: tempfile::TempDir,
    crs: Api<DynamicObject>,
    name: String,
}

impl Replicas {
    /// A Katalog whose CRs (kind Share) each get a ConfigMap holding `spec.value`.
    pub(crate) async fn install(prefix: &str) -> Self {
        let ns = namespace(prefix).await.unwrap();
        let group = format!("{}.replicas.orkestra.io", ns.name);
        let text = orkestra_test_support::configmap_katalog(prefix, "shares", &group, "Share", &ns.name, 4);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("katalog.yaml"), &text).unwrap();
        let katalog = orkestra_katalog::load_sources(&[("katalog.yaml".into(), text)]).unwrap();
        orkestra_kube::crd_install::install_crds(&ns.client, &katalog.katalog, WAIT)
            .await
            .unwrap();
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", "Share"));
        let crs = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
        Self {
            ns,
            dir,
            crs,
            name: prefix.to_string(),
        }
    }

    /// `ork run --ha MODE` as replica `identity`, its Live API on `port`, short Leases.
    fn spawn(&self, mode: &str, identity: &str, port: u16) -> Ork {
        self.spawn_with(
            mode,
            identity,
            port,
            &["--lease-duration", LEASE, "--renew-period", RENEW],
        )
    }

    /// [`Replicas::spawn`] with `flags` for the Leases (none: the defaults, 10 s and 2 s).
    fn spawn_with(&self, mode: &str, identity: &str, port: u16, flags: &[&str]) -> Ork {
        let cluster = orkestra_test_support::cluster().unwrap();
        let katalog = self.dir.path().join("katalog.yaml");
        let addr = format!("127.0.0.1:{port}");
        let mut args = vec![
            "run",
            "-f",
            katalog.to_str().unwrap(),
            "--ha",
            mode,
            "--lease-namespace",
            &self.ns.name,
            "--identity",
            identity,
            "--http-addr",
            &addr,
        ];
        args.extend(flags);
        Ork::spawn(
            &args,
            &[
                ("KUBECONFIG", cluster.kubeconfig.to_str().unwrap()),
                ("ORK_API_TOKEN", ""),
            ],
        )
    }

    pub(crate) async fn create(&self, range: std::ops::Range<usize>, value: &str) {
        for i in range {
            let cr: DynamicObject = serde_json::from_value(json!({
                "apiVersion": self.crs_api_version(),
                "kind": "Share",
                "metadata": {"name": format!("s{i}")},
                "spec": {"value": value},
            }))
            .unwrap();
            self.crs.create(&PostParams::default(), &cr).await.unwrap();
        }
    }

    fn crs_api_version(&self) -> String {
        format!("{}.replicas.orkestra.io/v1", self.ns.name)
    }

    /// Sets `spec.value` of every CR.
    async fn update_all(&self, value: &str) {
        for cr in self.crs.list(&ListParams::default()).await.unwrap() {
            let name = cr.metadata.name.unwrap();
            let patch = json!({"spec": {"value": value}});
            self.crs
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }

    /// Waits until all `count` CRs converged on `value`; returns how long that took.
    pub(crate) async fn converged(&self, count: usize, value: &str, within: Duration) -> Duration {
        let started = Instant::now();
        let maps: Api<ConfigMap> = Api::namespaced(self.ns.client.clone(), &self.ns.name);
        eventually(&format!("{count} CRs converged on {value:?}"), within, || async {
            let crs = self.crs.list(&ListParams::default()).await.ok()?;
            let maps = maps.list(&ListParams::default()).await.ok()?;
            let done = crs
                .items
                .iter()
                .filter(|cr| {
                    let name = cr.metadata.name.as_deref().unwrap_or_default();
                    let map = maps
                        .items
                        .iter()
                        .find(|m| m.metadata.name.as_deref() == Some(&format!("{name}-c")));
                    let observed = &cr.data["status"]["observedGeneration"];
                    map.and_then(|m| m.data.as_ref()?.get("value").cloned()).as_deref() == Some(value)
                        && observed.as_i64() == cr.metadata.generation
                })
                .count();
            (crs.items.len() == count && done == count && maps.items.len() >= count).then_some(())
        })
        .await
        .unwrap();
        started.elapsed()
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn health(port: u16) -> Option<Value> {
    let url = format!("http://127.0.0.1:{port}/katalog/shares/health");
    reqwest::get(url).await.ok()?.json().await.ok()
}

async fn katalog(port: u16) -> Option<Value> {
    reqwest::get(format!("http://127.0.0.1:{port}/katalog"))
        .await
        .ok()?
        .json()
        .await
        .ok()
}

/// The `owned` count each replica reports, once every replica's ring names `members`.
async fn settled_shares(ports: &[u16], members: usize) -> Vec<u64> {
    eventually(&format!("{members} settled shard members"), WAIT, || async {
        let mut owned = Vec::new();
        for port in ports {
            let info = katalog(*port).await?;
            let ha = &info["ha"];
            if ha["settled"] != true || ha["members"].as_array()?.len() != members {
                return None;
            }
            owned.push(health(*port).await?["owned"].as_u64()?);
        }
        Some(owned)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn leader_mode_runs_one_replica_and_hands_over_at_once_on_sigterm() {
    let replicas = Replicas::install("ha-leader").await;
    let ports = [free_port(), free_port()];
    let mut first = replicas.spawn("leader", "first", ports[0]);
    first.wait_for("Live API on", WAIT);
    // The first replica is elected before the second exists.
    let konductor = |port| async move { katalog(port).await.map(|k| k["isKonductor"] == true) };
    eventually("the first replica elected", WAIT, || async {
        konductor(ports[0]).await.filter(|k| *k)
    })
    .await
    .unwrap();
    let mut second = replicas.spawn("leader", "second", ports[1]);
    second.wait_for("Live API on", WAIT);
    replicas.create(0..20, "one").await;
    replicas.converged(20, "one", WAIT).await;
    let standby = eventually("the second replica's Live API", WAIT, || health(ports[1]))
        .await
        .unwrap();
    assert_eq!(standby["isKonductor"], false, "{standby}");
    assert_eq!(
        standby["totalReconciles"], 0,
        "the follower reconciled nothing: {standby}"
    );
    assert_eq!(standby["owned"], 0, "{standby}");
    let lease: Api<Lease> = Api::namespaced(replicas.ns.client.clone(), &replicas.ns.name);
    let name = format!("orkestra-konductor-{}", replicas.name);
    let held = lease.get(&name).await.unwrap();
    assert_eq!(held.spec.unwrap().holder_identity.as_deref(), Some("first"));

    // SIGTERM: in-flight work drains, the Lease is released, the follower takes over within
    // its next look (1 s here), not the 4 s the Lease would take to expire.
    let stopped = Instant::now();
    let status = first.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    // Released: unheld, or already taken by the follower, whose next look (1 s) can come
    // before this read. That it did not wait out the Lease's expiry is the hand-over time
    // checked below.
    let holder = lease.get(&name).await.unwrap().spec.unwrap().holder_identity;
    assert!(
        matches!(holder.as_deref(), None | Some("second")),
        "the Lease is released at shutdown, not held by {holder:?}"
    );
    eventually("the second replica elected", WAIT, || async {
        konductor(ports[1]).await.filter(|k| *k)
    })
    .await
    .unwrap();
    let handover = stopped.elapsed();
    replicas.update_all("two").await;
    replicas.converged(20, "two", WAIT).await;
    assert!(
        handover < Duration::from_secs(4),
        "hand-over took {handover:?}, as long as the Lease's expiry"
    );
    eprintln!("leader hand-over after SIGTERM: {handover:?} (Lease {LEASE}, renew {RENEW})");
    drop(second);
}

#[tokio::test]
async fn shard_mode_splits_the_crs_and_takes_over_a_killed_replica_within_the_lease() {
    let replicas = Replicas::install("ha-shard").await;
    let ports = [free_port(), free_port(), free_port()];
    let mut members: Vec<Ork> = ["a", "b", "c"]
        .iter()
        .zip(ports)
        .map(|(id, port)| replicas.spawn("shard", id, port))
        .collect();
    for member in &mut members {
        member.wait_for("Live API on", WAIT);
    }
    replicas.create(0..60, "one").await;
    replicas.converged(60, "one", WAIT).await;
    let shares = settled_shares(&ports, 3).await;
    assert_eq!(
        shares.iter().sum::<u64>(),
        60,
        "every CR has exactly one owner: {shares:?}"
    );
    assert!(shares.iter().all(|&n| n > 0), "each replica holds a share: {shares:?}");
    for port in ports {
        let health = health(port).await.unwrap();
        assert!(health["totalReconciles"].as_u64().unwrap() > 0, "{health}");
    }

    // kill -9 one member mid-work: its Lease is left to expire, the others take its CRs.
    // Changed after the kill, its third of the CRs converges only once they have.
    replicas.update_all("two").await;
    members
        .remove(0)
        .signal_and_wait(libc::SIGKILL, Duration::from_secs(10));
    let killed = Instant::now();
    replicas.update_all("two-b").await;
    replicas.converged(60, "two-b", Duration::from_secs(60)).await;
    let reconverged = killed.elapsed();
    let shares = settled_shares(&ports[1..], 2).await;
    assert_eq!(
        shares.iter().sum::<u64>(),
        60,
        "the survivors own every CR once: {shares:?}"
    );
    eprintln!(
        "shard failover after kill -9: every CR converged {reconverged:?} after the kill (Lease {LEASE}, renew {RENEW})"
    );

    // A new member joins: the ring grows back to three without a CR owned twice.
    let port = free_port();
    let mut joined = replicas.spawn("shard", "d", port);
    joined.wait_for("Live API on", WAIT);
    let shares = settled_shares(&[ports[1], ports[2], port], 3).await;
    assert_eq!(shares.iter().sum::<u64>(), 60, "{shares:?}");
    assert!(shares[2] > 0, "the new member took a share: {shares:?}");
    replicas.update_all("three").await;
    replicas.converged(60, "three", WAIT).await;

    // SIGTERM: the member Lease goes at once, and the two left take its share well before
    // a Lease of its would have expired.
    let leases: Api<Lease> = Api::namespaced(replicas.ns.client.clone(), &replicas.ns.name);
    let member = format!("orkestra-{}-d", replicas.name);
    assert!(leases.get_opt(&member).await.unwrap().is_some());
    let stopped = Instant::now();
    let status = joined.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert!(
        leases.get_opt(&member).await.unwrap().is_none(),
        "the member Lease is released"
    );
    let shares = settled_shares(&ports[1..], 2).await;
    let rebalanced = stopped.elapsed();
    assert_eq!(shares.iter().sum::<u64>(), 60, "{shares:?}");
    replicas.update_all("four").await;
    replicas.converged(60, "four", WAIT).await;
    eprintln!("shard member SIGTERM: its share taken over {rebalanced:?} after the signal (Lease {LEASE})");
}

/// Waits until the replica on `port` reconciles (elected, in leader mode).
async fn elected(port: u16) {
    eventually(&format!("the replica on {port} elected"), WAIT, || async {
        katalog(port).await.filter(|k| k["isKonductor"] == true)
    })
    .await
    .unwrap();
}

/// Issue 50: after `kill -9` of the leader a new CR waited 11.1 s, the Lease's expiry plus
/// a renew period. With the default Leases (10 s, 2 s), the follower knocks on the leader's
/// Live API, finds its port closed, and takes over at once: a CR created right after the
/// kill is reconciled within 2 s of it (checked against 4 s here, on a busy machine; the
/// figure is printed). SIGTERM hands over as quickly.
#[tokio::test]
async fn a_killed_or_stopped_leader_is_replaced_at_once_with_the_default_leases() {
    let replicas = Replicas::install("ha-failover").await;
    let ports = [free_port(), free_port(), free_port()];
    let mut first = replicas.spawn_with("leader", "first", ports[0], &[]);
    first.wait_for("the others watch 127.0.0.1", WAIT);
    elected(ports[0]).await;
    let mut second = replicas.spawn_with("leader", "second", ports[1], &[]);
    second.wait_for("Live API on", WAIT);
    replicas.create(0..10, "one").await;
    replicas.converged(10, "one", WAIT).await;

    let killed = Instant::now();
    let status = first.signal_and_wait(libc::SIGKILL, Duration::from_secs(10));
    assert!(!status.success());
    replicas.create(10..11, "one").await;
    replicas.converged(11, "one", Duration::from_secs(30)).await;
    let after_kill = killed.elapsed();
    eprintln!("a new CR reconciled {after_kill:?} after kill -9 of the leader (Lease 10s, renew 2s)");
    assert!(
        after_kill < Duration::from_secs(4),
        "{after_kill:?}: the follower waited for the Lease instead of finding the leader gone"
    );

    let mut third = replicas.spawn_with("leader", "third", ports[2], &[]);
    third.wait_for("Live API on", WAIT);
    let stopped = Instant::now();
    let status = second.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    replicas.create(11..12, "one").await;
    replicas.converged(12, "one", Duration::from_secs(30)).await;
    let after_stop = stopped.elapsed();
    eprintln!("a new CR reconciled {after_stop:?} after SIGTERM of the leader (Lease 10s, renew 2s)");
    assert!(after_stop < Duration::from_secs(4), "{after_stop:?}");
    elected(ports[2]).await;
}

/// Issue 50: a rolling upgrade of two replicas (each replaced by a new one, the old one
/// stopped with SIGTERM as a Deployment does) under a steady stream of CR changes loses no
/// change, and at no sampled moment do two replicas reconcile at once.
#[tokio::test]
async fn a_rolling_upgrade_under_a_stream_of_changes_loses_none() {
    use std::sync::atomic::{AtomicBool, AtomicU64};
    let replicas = std::sync::Arc::new(Replicas::install("ha-rolling").await);
    let ports = [free_port(), free_port(), free_port(), free_port()];
    let mut old_a = replicas.spawn("leader", "a", ports[0]);
    old_a.wait_for("Live API on", WAIT);
    elected(ports[0]).await;
    let mut old_b = replicas.spawn("leader", "b", ports[1]);
    old_b.wait_for("Live API on", WAIT);
    let count = 10;
    replicas.create(0..count, "v0").await;
    replicas.converged(count, "v0", WAIT).await;

    // The stream: one change every 50 ms, round the CRs; the last value each got is kept.
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let written = std::sync::Arc::new(AtomicU64::new(0));
    let stream = {
        let (replicas, done, written) = (replicas.clone(), done.clone(), written.clone());
        tokio::spawn(async move {
            let mut last = vec![String::from("v0"); count];
            let mut n = 0u64;
            while !done.load(Ordering::Relaxed) {
                n += 1;
                let i = (n as usize) % count;
                let value = format!("v{n}");
                let patch = json!({"spec": {"value": value}});
                if replicas
                    .crs
                    .patch(&format!("s{i}"), &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .is_ok()
                {
                    last[i] = value;
                    written.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            last
        })
    };
    // Two leaders at once would show as two replicas saying they reconcile.
    let sampling = {
        let done = done.clone();
        tokio::spawn(async move {
            let mut overlaps = 0;
            while !done.load(Ordering::Relaxed) {
                // All at once: a hand-over between two sequential reads would look like two.
                let read = futures::future::join_all(ports.map(katalog)).await;
                let leading = read.iter().flatten().filter(|k| k["isKonductor"] == true).count();
                overlaps += usize::from(leading > 1);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            overlaps
        })
    };
    // Roll: a new replica up, then an old one stopped; twice.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut new_a = replicas.spawn("leader", "a2", ports[2]);
    new_a.wait_for("Live API on", WAIT);
    assert!(old_a.signal_and_wait(libc::SIGTERM, Duration::from_secs(30)).success());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut new_b = replicas.spawn("leader", "b2", ports[3]);
    new_b.wait_for("Live API on", WAIT);
    assert!(old_b.signal_and_wait(libc::SIGTERM, Duration::from_secs(30)).success());
    tokio::time::sleep(Duration::from_secs(3)).await;
    done.store(true, Ordering::Relaxed);
    let last = stream.await.unwrap();
    let overlaps = sampling.await.unwrap();
    let changes = written.load(Ordering::Relaxed);
    assert!(changes > 100, "a steady stream: {changes} changes");

    // Every CR ends on the last value written to it: no change was lost.
    let maps: Api<ConfigMap> = Api::namespaced(replicas.ns.client.clone(), &replicas.ns.name);
    let lost = eventually("every CR on its last value", WAIT, || async {
        let mut lost = Vec::new();
        for (i, value) in last.iter().enumerate() {
            let map = maps.get(&format!("s{i}-c")).await.ok()?;
            let got = map.data.and_then(|d| d.get("value").cloned()).unwrap_or_default();
            if got != *value {
                lost.push(format!("s{i}: {got} instead of {value}"));
            }
        }
        lost.is_empty().then_some(lost)
    })
    .await;
    eprintln!("rolling upgrade: {changes} changes, {overlaps} moments with two replicas reconciling");
    assert!(lost.is_ok(), "changes lost: {lost:?}");
    assert_eq!(overlaps, 0, "two replicas reconciled at once");
    drop((new_a, new_b));
}
