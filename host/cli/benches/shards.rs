//! Replicas at scale, as `ork run` processes against the local control plane:
//! - 10,000 pre-existing CRs (one ConfigMap and a Ready status each) converged by one
//!   replica, then another 10,000 by three replicas in shard mode (each its own namespace
//!   and CRD of the same API server): wall time, the API server's CPU, each replica's RSS;
//! - failover: one shard replica killed with SIGKILL, 50 of the CRs it owned changed at
//!   once, and the time until the first and the last of them is reconciled by another
//!   replica (default Lease settings: 10 s duration, 2 s renewal).
//!
//! Needs the local control plane (`ork control-plane install`).
//! Run: `cargo bench -p orkestra-cli --bench shards` (`SHARD_CRS=2000` for a quicker run).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks name the objects they create; no tenant input reaches these calls"
)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra::ha::ring::Ring;
use serde_json::json;

const ORK: &str = env!("CARGO_BIN_EXE_ork");
const WORKERS: usize = 10;
const CHANGED: usize = 50;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(bench());
}

async fn bench() {
    let crs: usize = std::env::var("SHARD_CRS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let cluster = orkestra_test_support::cluster().expect("the local control plane");
    let apiserver = apiserver_pid(&cluster.server).expect("the API server's process");
    println!("{crs} CRs per run, {WORKERS} workers per replica, API server pid {apiserver}");
    let one = Phase::new("shards-one", crs).await;
    let mut single = one.converge(&["none"], apiserver).await;
    stop(&mut single);
    let three = Phase::new("shards-three", crs).await;
    let mut replicas = three.converge(&["shard", "shard", "shard"], apiserver).await;
    three.failover(&mut replicas).await;
}

struct Phase {
    ns: orkestra_test_support::TestNamespace,
    dir: tempfile::TempDir,
    crs: Api<DynamicObject>,
    count: usize,
}

impl Phase {
    async fn new(prefix: &str, count: usize) -> Self {
        let ns = orkestra_test_support::namespace(prefix).await.expect("a namespace");
        let group = format!("{}.shards.orkestra.io", ns.name);
        let text = orkestra_test_support::configmap_katalog(prefix, "items", &group, "Item", &ns.name, WORKERS);
        let dir = tempfile::tempdir().expect("a directory");
        std::fs::write(dir.path().join("katalog.yaml"), &text).expect("the Katalog");
        let katalog = orkestra_katalog::load_sources(&[("katalog.yaml".into(), text)]).expect("a valid Katalog");
        orkestra_kube::crd_install::install_crds(&ns.client, &katalog.katalog, Duration::from_secs(60))
            .await
            .expect("the CRD");
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", "Item"));
        let crs = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
        let phase = Self { ns, dir, crs, count };
        let started = Instant::now();
        let api_version = format!("{group}/v1");
        futures::stream::iter(0..count)
            .map(|i| {
                let cr: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": api_version, "kind": "Item",
                    "metadata": {"name": format!("i{i}")}, "spec": {"value": "one"},
                }))
                .expect("a CR");
                let crs = phase.crs.clone();
                async move { crs.create(&PostParams::default(), &cr).await.expect("created") }
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await;
        println!(
            "{prefix}: {count} CRs created in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        phase
    }

    /// Starts one replica per mode and waits until every CR's status observed its
    /// generation; prints the time, the API server's CPU and each replica's memory.
    async fn converge(&self, modes: &[&str], apiserver: u32) -> Vec<Child> {
        let cpu_before = cpu_seconds(apiserver);
        let started = Instant::now();
        let replicas: Vec<Child> = modes
            .iter()
            .enumerate()
            .map(|(i, mode)| self.spawn(mode, &format!("r{i}")))
            .collect();
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            if self.converged(|_| true).await >= self.count {
                break;
            }
        }
        let took = started.elapsed().as_secs_f64();
        let cpu = cpu_seconds(apiserver) - cpu_before;
        let rss: Vec<String> = replicas
            .iter()
            .map(|r| {
                format!(
                    "{:.0} MiB (peak {:.0})",
                    status_mib(r.id(), "VmRSS:"),
                    status_mib(r.id(), "VmHWM:")
                )
            })
            .collect();
        println!(
            "{} replica(s) ({}): {} CRs converged in {took:.1} s ({:.0} CRs/s); API server CPU {cpu:.1} s ({:.2} cores); RSS per replica: {}",
            modes.len(),
            modes.join(", "),
            self.count,
            self.count as f64 / took,
            cpu / took,
            rss.join(", ")
        );
        replicas
    }

    fn spawn(&self, mode: &str, identity: &str) -> Child {
        let cluster = orkestra_test_support::cluster().expect("the control plane");
        let katalog = self.dir.path().join("katalog.yaml");
        Command::new(ORK)
            .args([
                "run",
                "-f",
                katalog.to_str().expect("utf-8"),
                "--ha",
                mode,
                "--identity",
                identity,
            ])
            .args(["--lease-namespace", &self.ns.name, "--no-http"])
            .env("KUBECONFIG", &cluster.kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ork runs")
    }

    /// How many CRs `pick` chooses have a status that observed their generation.
    async fn converged(&self, pick: impl Fn(&str) -> bool) -> usize {
        // From the API server's watch cache: the poll must not weigh on what it measures.
        let Ok(list) = self.crs.list(&ListParams::default().match_any()).await else {
            return 0;
        };
        list.items
            .iter()
            .filter(|cr| pick(cr.metadata.name.as_deref().unwrap_or_default()))
            .filter(|cr| cr.data["status"]["observedGeneration"].as_i64() == cr.metadata.generation)
            .count()
    }

    /// Kills replica r0, changes CRs it owned, and times their reconcile elsewhere.
    async fn failover(&self, replicas: &mut [Child]) {
        let ring = Ring::new(["r0", "r1", "r2"].map(String::from));
        let owned: Vec<String> = (0..self.count)
            .map(|i| format!("i{i}"))
            .filter(|name| ring.owner(&format!("items/{}/{name}", self.ns.name)) == Some("r0"))
            .take(CHANGED)
            .collect();
        // Settled first: every replica renewed its Lease a few times.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let killed = Instant::now();
        let _ = replicas[0].kill();
        let _ = replicas[0].wait();
        let patch = json!({"spec": {"value": "two"}});
        for name in &owned {
            self.crs
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("patched");
        }
        let changed = killed.elapsed().as_secs_f64();
        let mut first = None;
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let done = self.converged(|name| owned.iter().any(|o| o == name)).await;
            if done > 0 && first.is_none() {
                first = Some(killed.elapsed().as_secs_f64());
            }
            if done >= owned.len() || killed.elapsed() > Duration::from_secs(120) {
                break;
            }
        }
        println!(
            "failover after kill -9 of r0 (Lease 10 s, renew 2 s): {} of its CRs changed within {changed:.1} s; first reconciled elsewhere at {:.1} s, all at {:.1} s",
            owned.len(),
            first.unwrap_or(f64::NAN),
            killed.elapsed().as_secs_f64()
        );
        stop(replicas);
    }
}

fn stop(replicas: &mut [Child]) {
    for replica in replicas {
        let _ = replica.kill();
        let _ = replica.wait();
    }
}

/// The pid of the kube-apiserver serving `server` (`https://127.0.0.1:PORT`).
fn apiserver_pid(server: &str) -> Option<u32> {
    let port = server.rsplit(':').next()?.trim_end_matches('/');
    let flag = format!("--secure-port={port}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
        let text = String::from_utf8_lossy(&cmdline);
        (text.contains("kube-apiserver") && text.split('\0').any(|a| a == flag)).then_some(pid)
    })
}

/// User plus system CPU seconds of a process.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / clock_ticks()
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}
