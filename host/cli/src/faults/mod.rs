//! `ork test --faults`: a fault campaign on a user's own Katalogs. For each Katalog it starts
//! a control plane of its own, puts the fault-injecting [`proxy`] between it and `ork run`,
//! and runs the Katalog's sample CRs once cleanly (the baseline) and once per fault: the
//! runtime killed after its k-th write and started again, the API server restarted
//! mid-convergence, 409s, 429s and 410s on a share of requests, watch events delayed,
//! duplicated or dropped, admission webhooks failing or answering late (where the Katalog
//! has any), component calls trapping (where it declares a component). After each it checks what must hold whatever happened: every CR
//! settles where the baseline did, with the same children and no duplicate, its deletion
//! removes its finalizers and its children, writes stay bounded, and the runtime never
//! panics. A table shows Katalog × fault × invariant; any violation exits 1 with the shortest
//! reproduction (fault, step, object).

mod proxy;
mod runtime;
mod workload;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use kube::discovery::Discovery;

use orkestra_gateway::failpoint::Misbehaviour;
use proxy::{Injection, Proxy};
use runtime::{Runtime, idle};
use workload::{Sample, Settled};

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Run the fault campaign (the only test `ork test` runs for now).
    #[arg(long, required = true)]
    faults: bool,
    /// Katalogs to test, each on its own control plane (a Katalog's own files: one each).
    #[arg(value_name = "KATALOG", required = true)]
    katalogs: Vec<PathBuf>,
    /// The short set, as CI runs it: the baseline, the runtime killed after its first write,
    /// dropped watch events, and failing webhooks where the Katalog has any. Default: every fault, and a kill after each write of the
    /// baseline (up to --max-kills).
    #[arg(long)]
    reduced: bool,
    /// Only the faults whose name contains this text (as the table names them: `410 on`,
    /// `kill -9 after write 3`), after the baseline: to run a violation's reproduction again.
    #[arg(long, value_name = "TEXT")]
    only: Option<String>,
    /// Kills after the k-th write for k up to this many (the full set).
    #[arg(long, value_name = "N", default_value_t = 8)]
    max_kills: u64,
    /// How long a scenario's CRs may take to settle.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = orkestra_expr::duration::parse)]
    timeout: Duration,
    #[command(flatten)]
    plane: super::control_plane::PlaneArgs,
}

/// One fault, on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Baseline,
    KillAfterWrite(u64),
    ApiServerRestart,
    Proxy(Injection),
    /// Every n-th component call traps ([`orkestra_wasm::failpoint`]).
    ComponentTraps(u64),
    /// The runtime's admission webhooks misbehave ([`orkestra_gateway::failpoint`]).
    Webhook(Misbehaviour),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Baseline => f.write_str("baseline"),
            Fault::KillAfterWrite(k) => write!(f, "kill -9 after write {k}"),
            Fault::ApiServerRestart => f.write_str("API server restarted"),
            Fault::ComponentTraps(every) => write!(f, "1 in {every} component calls traps"),
            Fault::Webhook(Misbehaviour::Fail { every }) => write!(f, "webhook fails 1 in {every}"),
            Fault::Webhook(Misbehaviour::Late { every }) => write!(f, "webhook late 1 in {every}"),
            Fault::Proxy(Injection::Conflict { every }) => write!(f, "409 on 1 in {every} writes"),
            Fault::Proxy(Injection::Throttle { every }) => write!(f, "429 on 1 in {every} requests"),
            Fault::Proxy(Injection::Gone { every }) => write!(f, "410 on 1 in {every} watches"),
            Fault::Proxy(Injection::Delay(d)) => write!(f, "watch events {}ms late", d.as_millis()),
            Fault::Proxy(Injection::Duplicate) => f.write_str("watch events twice"),
            Fault::Proxy(Injection::Drop { every }) => write!(f, "1 in {every} watch events dropped"),
            Fault::Proxy(other) => write!(f, "{other:?}"),
        }
    }
}

/// The invariants, in the table's order.
const INVARIANTS: [&str; 6] = ["settled", "ready", "children", "cleanup", "writes", "no panic"];

/// What one scenario showed.
struct Outcome {
    fault: Fault,
    /// Per invariant, `None` when it held, else what broke it.
    broken: [Option<String>; 6],
    writes_per_cr: f64,
    took: Option<Duration>,
    settled: Option<Settled>,
    /// What the runtime deleted while the CRs settled.
    deletes: usize,
    /// Why the fault did not happen (the run took fewer writes than the one to kill after).
    skipped: Option<String>,
    log: PathBuf,
}

pub async fn test(args: TestArgs) -> anyhow::Result<ExitCode> {
    if !args.faults {
        anyhow::bail!("say what to test: --faults");
    }
    let binaries = super::control_plane::install(&args.plane.version.release()).await?;
    let mut failed = false;
    let mut rows = Vec::new();
    for path in &args.katalogs {
        // One Katalog that cannot be run (it does not load, its CRDs do not install) fails
        // the campaign, and the others are still tested.
        match campaign(&args, path, binaries.clone()).await {
            Ok(outcomes) => {
                failed |= outcomes.iter().any(|o| o.broken.iter().any(Option::is_some));
                rows.push((path.clone(), outcomes));
            }
            Err(error) => {
                eprintln!("error: {}: {error:#}", path.display());
                failed = true;
            }
        }
    }
    print_table(&rows);
    let mut shortest: Vec<(&Path, &Outcome, &str)> = Vec::new();
    for (path, outcomes) in &rows {
        for outcome in outcomes {
            for broken in outcome.broken.iter().flatten() {
                shortest.push((path, outcome, broken));
            }
        }
    }
    // The shortest reproduction first: the fewest writes before the fault.
    shortest.sort_by_key(|(_, o, _)| match o.fault {
        Fault::KillAfterWrite(k) => k,
        _ => 0,
    });
    for (path, outcome, broken) in shortest.iter().take(10) {
        println!(
            "violation: {} under {}: {broken} (the runtime's log: {}; again: ork test --faults --only '{}' {})",
            path.display(),
            outcome.fault,
            outcome.log.display(),
            outcome.fault,
            path.display()
        );
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// What of the runtime a Katalog uses that a fault of its own reaches.
#[derive(Debug, Clone, Copy, Default)]
struct Uses {
    /// A Wasm component.
    components: bool,
    /// Admission webhooks (rules, provenance, protection, conversion).
    webhooks: bool,
}

/// The faults a campaign runs, given the baseline's writes and what the Katalog uses.
fn faults(args: &TestArgs, baseline_writes: u64, uses: Uses) -> Vec<Fault> {
    let mut faults = vec![Fault::KillAfterWrite(1)];
    if args.reduced {
        faults.push(Fault::Proxy(Injection::Drop { every: 3 }));
        if uses.webhooks {
            faults.push(Fault::Webhook(Misbehaviour::Fail { every: 2 }));
        }
        return faults;
    }
    faults.extend((2..=baseline_writes.min(args.max_kills)).map(Fault::KillAfterWrite));
    faults.extend([
        Fault::ApiServerRestart,
        Fault::Proxy(Injection::Conflict { every: 3 }),
        Fault::Proxy(Injection::Throttle { every: 4 }),
        Fault::Proxy(Injection::Gone { every: 2 }),
        Fault::Proxy(Injection::Delay(Duration::from_millis(300))),
        Fault::Proxy(Injection::Duplicate),
        Fault::Proxy(Injection::Drop { every: 3 }),
    ]);
    if uses.components {
        faults.push(Fault::ComponentTraps(3));
    }
    if uses.webhooks {
        faults.extend([
            Fault::Webhook(Misbehaviour::Fail { every: 2 }),
            Fault::Webhook(Misbehaviour::Late { every: 3 }),
        ]);
    }
    faults
}

/// Everything one Katalog's campaign shares.
struct Bench {
    plane: orkestra_control_plane::ControlPlane,
    client: kube::Client,
    proxy: Proxy,
    kubeconfig: PathBuf,
    dir: PathBuf,
    katalog: PathBuf,
    samples: Vec<Sample>,
    kinds: Vec<kube::core::ApiResource>,
    timeout: Duration,
    /// Asks the runtime's Live API whether it is idle.
    http: reqwest::Client,
}

async fn campaign(
    args: &TestArgs,
    path: &Path,
    binaries: orkestra_control_plane::Binaries,
) -> anyhow::Result<Vec<Outcome>> {
    let katalog = orkestra::runtime::motifs::load_cached(&[path.to_path_buf()], super::component::cache_dir())?;
    let temp = tempfile::Builder::new().prefix("ork-faults-").tempdir()?;
    let dir = temp.path().to_path_buf();
    let options = super::control_plane::options(dir.join("plane"), None, true, binaries, args.plane.nodes);
    let progress = super::progress::Progress::start(format!("{}: starting a control plane", path.display()));
    let mut plane = orkestra_control_plane::ControlPlane::start_api_server(&options).await?;
    let client = plane.client().await?;
    let crds = orkestra_kube::crd_install::install_crds(&client, &katalog.katalog, Duration::from_secs(60)).await?;
    plane.start_controllers(&options).await?;
    orkestra_kube::crd_install::wait_collected(&client, &crds, Duration::from_secs(60)).await?;
    for crd in katalog.katalog.crds.values().filter(|c| c.entry.enabled) {
        for file in crd.entry.setup_files() {
            orkestra_kube::manifests::apply_file(&client, &crd.resolve(file), "default").await?;
        }
        orkestra_kube::setup_wait::wait_for(&client, &crd.entry.setup_waits(), "default").await?;
    }
    let discovery = Discovery::new(client.clone()).run().await?;
    let samples = workload::samples(&katalog, &discovery)?;
    let kinds = workload::child_kinds(&katalog, &discovery);
    let proxy = Proxy::start(client.clone()).await?;
    let kubeconfig = dir.join("proxy.kubeconfig");
    std::fs::write(&kubeconfig, proxy.kubeconfig())?;
    let mut bench = Bench {
        plane,
        client,
        proxy,
        kubeconfig,
        dir: dir.clone(),
        katalog: std::fs::canonicalize(path)?,
        samples,
        kinds,
        timeout: args.timeout,
        http: reqwest::Client::new(),
    };
    if bench.samples.is_empty() {
        progress.finish();
        println!(
            "{}: no sample CRs (crFiles) of its own kinds: nothing to run",
            path.display()
        );
        bench.plane.stop();
        return Ok(Vec::new());
    }
    progress.set(format!("{}: baseline", path.display()));
    let baseline = bench.scenario(Fault::Baseline, 0, None).await?;
    let deletes = baseline.deletes;
    let mut outcomes = Vec::new();
    let Some(reference) = baseline.settled.clone() else {
        progress.finish();
        outcomes.push(baseline);
        bench.plane.stop();
        let _ = temp.keep();
        return Ok(outcomes);
    };
    let writes = (baseline.writes_per_cr * bench.samples.len() as f64).round() as u64;
    outcomes.push(baseline);
    let uses = Uses {
        components: katalog
            .enabled()
            .any(|crd| !orkestra::runtime::slots::component_specs(crd).is_empty()),
        webhooks: orkestra_gateway::serving::any(&katalog),
    };
    let mut planned = faults(args, writes, uses);
    if let Some(only) = &args.only {
        planned.retain(|fault| fault.to_string().contains(only.as_str()));
    }
    for (n, fault) in planned.iter().enumerate() {
        progress.set(format!("{}: {fault} ({}/{})", path.display(), n + 1, planned.len()));
        let outcome = bench
            .scenario(*fault, n + 1, Some((&reference, writes, deletes)))
            .await?;
        outcomes.push(outcome);
    }
    progress.finish();
    bench.plane.stop();
    if outcomes.iter().any(|o| o.broken.iter().any(Option::is_some)) {
        // The runtime's logs, which the violations name.
        let _ = temp.keep();
    }
    Ok(outcomes)
}

impl Bench {
    /// [`workload::settle`] of the samples in `namespace`, the runtime logging to `log`.
    async fn settle(&self, namespace: &str, want: Option<&Settled>, log: &Path) -> Option<(Settled, Duration, bool)> {
        let idle = || idle(&self.http, log);
        workload::settle(
            &self.client,
            &self.samples,
            &self.kinds,
            namespace,
            self.timeout,
            want,
            idle,
        )
        .await
    }

    /// Runs the samples under `fault` in namespace `faults-<n>`; `reference` is the
    /// baseline's settled state, writes and deletes (none for the baseline itself).
    async fn scenario(
        &mut self,
        fault: Fault,
        n: usize,
        reference: Option<(&Settled, u64, usize)>,
    ) -> anyhow::Result<Outcome> {
        let namespace = format!("faults-{n}");
        let namespaces = orkestra_kube::objects::all::<k8s_openapi::api::core::v1::Namespace>(self.client.clone());
        let object = serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}}))?;
        namespaces.create(&Default::default(), &object).await?;
        let log = self.dir.join(format!("runtime-{n}.log"));
        let mut broken: [Option<String>; 6] = Default::default();
        let mut skipped = None;
        self.proxy.faults.arm(match fault {
            Fault::Proxy(injection) => injection,
            Fault::KillAfterWrite(k) => Injection::CrashAfterWrite { k },
            _ => Injection::None,
        });
        let mut runtime = Runtime::start(self, &log, &namespace, fault)?;
        workload::apply(&self.client, &self.samples, &namespace, self.timeout).await?;
        match fault {
            Fault::KillAfterWrite(k) => {
                // A run may take fewer writes than the baseline did: then there is no k-th
                // write to kill it after, and nothing to check beyond the clean run.
                let quiet = self.settle(&namespace, None, &log);
                tokio::select! {
                    () = self.proxy.faults.crashed() => {
                        runtime.kill();
                        self.proxy.faults.disarm();
                        runtime = Runtime::start(self, &log, &namespace, Fault::Baseline)?;
                    }
                    _ = quiet => {
                        self.proxy.faults.disarm();
                        skipped = Some(format!("settled after {} writes, before write {k}", self.proxy.faults.writes()));
                    }
                }
            }
            Fault::ApiServerRestart => {
                let until = Instant::now() + self.timeout;
                while self.proxy.faults.writes() == 0 && Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                self.plane.kill("kube-apiserver");
                self.plane.restart("kube-apiserver")?;
            }
            _ => {}
        }
        let settled = self
            .settle(&namespace, reference.map(|(settled, _, _)| settled), &log)
            .await;
        let first = self.samples.first().map(|s| s.label(&namespace)).unwrap_or_default();
        let mut unsettled = format!("the CRs did not settle within {:?} (first: {first})", self.timeout);
        if let Some(status) = runtime.exited() {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
            unsettled.push_str(&format!("; the runtime exited ({status}): {last}"));
        }
        // Still moving at the end: what it got to is compared all the same.
        let settled = match settled {
            Some((state, took, true)) => Some((state, took)),
            Some((state, _, false)) => {
                broken[0] = Some(unsettled.clone());
                reference.is_some().then_some((state, self.timeout))
            }
            None => None,
        };
        let writes = self.proxy.faults.writes();
        let injected = self.proxy.faults.injected();
        let deletes = self.proxy.faults.deletes();
        let count = self.samples.len().max(1) as u64;
        let writes_per_cr = writes as f64 / count as f64;
        match (&settled, reference) {
            (None, _) => {
                broken[0].get_or_insert(unsettled);
            }
            (Some((got, _)), Some((want, baseline_writes, baseline_deletes))) => {
                if got.ready != want.ready {
                    let differs = got.ready.iter().find(|(k, v)| want.ready.get(*k) != Some(v));
                    broken[1] = Some(format!("Ready differs from the baseline: {differs:?} in {namespace}"));
                }
                if got.children != want.children {
                    let extra: Vec<_> = got
                        .children
                        .iter()
                        .filter(|(k, v)| want.children.get(*k) != Some(v))
                        .collect();
                    let missing: Vec<_> = want
                        .children
                        .keys()
                        .filter(|k| !got.children.contains_key(*k))
                        .collect();
                    broken[2] = Some(format!(
                        "children differ from the baseline in {namespace}: extra or duplicated {extra:?}, missing {missing:?}"
                    ));
                }
                // A child the Katalog wants, deleted on the way (and made again) does not
                // show in the end state: the deletes do.
                if deletes.len() > baseline_deletes {
                    broken[2].get_or_insert(format!(
                        "the runtime deleted {} objects where the baseline deleted {baseline_deletes}: {deletes:?}",
                        deletes.len()
                    ));
                }
                // Each fault may cost a retry of what it hit; beyond that, a runtime that
                // loops on a fault would show here.
                let bound = 3 * baseline_writes + 2 * injected + 2 * count;
                if writes > bound {
                    let most: Vec<String> = self
                        .proxy
                        .faults
                        .most_written(3)
                        .into_iter()
                        .map(|(write, times)| format!("{write} ×{times}"))
                        .collect();
                    broken[4] = Some(format!(
                        "{writes} writes, more than {bound} (baseline {baseline_writes}, {injected} faults); most: {}",
                        most.join(", ")
                    ));
                }
            }
            (Some(_), None) => {}
        }
        let children = settled.as_ref().map(|(s, _)| s.children.clone()).unwrap_or_default();
        let left = workload::delete(
            &self.client,
            &self.samples,
            &self.kinds,
            &namespace,
            &children,
            self.timeout,
        )
        .await;
        if !left.is_empty() {
            broken[3] = Some(format!("left after deletion: {}", left.join(", ")));
        }
        runtime.stop(Duration::from_secs(30)).await;
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(line) = said.lines().find(|l| l.contains("panicked")) {
            broken[5] = Some(format!("the runtime panicked: {line}"));
        }
        let _ = namespaces.delete(&namespace, &Default::default()).await;
        Ok(Outcome {
            fault,
            broken,
            writes_per_cr,
            took: settled.as_ref().map(|(_, took)| *took),
            settled: settled.map(|(s, _)| s),
            deletes: deletes.len(),
            skipped,
            log,
        })
    }
}

fn print_table(rows: &[(PathBuf, Vec<Outcome>)]) {
    let mut header = format!("{:<40} {:<28}", "KATALOG", "FAULT");
    for invariant in INVARIANTS {
        header.push_str(&format!(" {invariant:<9}"));
    }
    header.push_str(" WRITES/CR SETTLED IN");
    println!("{header}");
    for (path, outcomes) in rows {
        let name = path
            .parent()
            .and_then(|p| p.file_name())
            .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        for outcome in outcomes {
            let mut line = format!("{name:<40} {:<28}", outcome.fault.to_string());
            for broken in &outcome.broken {
                line.push_str(&format!(" {:<9}", if broken.is_some() { "FAIL" } else { "ok" }));
            }
            let took = outcome.took.map_or("-".into(), |t| format!("{:.1}s", t.as_secs_f64()));
            line.push_str(&format!(" {:<9.1} {took}", outcome.writes_per_cr));
            if let Some(why) = &outcome.skipped {
                line.push_str(&format!(" (no fault: {why})"));
            }
            println!("{line}");
        }
    }
}
