//! What the benchmarks that run contenders in processes of their own (`converge`,
//! `latency`, `live`) share: their scratch space and runtime, clients that say who they are,
//! the contenders' processes, and their peak memory.

#![allow(dead_code, reason = "each benchmark uses a part of it")]

pub mod allocator;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// Reconciles at once, per CRD, for every contender.
pub const WORKERS: usize = 10;

/// The work of a CRD entry in the side-by-side benchmarks, as its Katalog says it (under
/// the entry, indented six spaces): one ConfigMap per CR and a Ready status, [`WORKERS`]
/// reconciles at once, and controller-runtime's resync period (its manager's default
/// `SyncPeriod`, 10 hours; kube-runtime has none), not the Katalog's default of 30 s, and
/// no health and metrics stamps (a write per new CR no other contender makes): the same
/// work for every contender.
pub const WORK: &str = "      operatorBox:
        runtime: {stamps: false}
        reconcile:
          workers: 10
          resync: 10h
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}', data: {value: '{{ .spec.value }}'}}
";

/// The tokio runtime a benchmark (and each contender it runs of itself) runs on: two
/// workers, as the machine has two cores.
pub fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio")
}

/// A directory for a control plane of its own, in memory where the machine has `/dev/shm`.
pub fn scratch(prefix: &str) -> tempfile::TempDir {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(base)
        .expect("a directory")
}

/// The User-Agent a client of this run sends: how the audit log tells them apart.
pub fn agent(who: &str) -> String {
    format!("bench-{who}")
}

/// A client of the control plane at `KUBECONFIG`-style `kubeconfig`, sending `who`'s agent.
pub async fn client(kubeconfig: &Path, who: &str) -> kube::Client {
    let mut config = orkestra_control_plane::config_for(kubeconfig)
        .await
        .expect("the kubeconfig");
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(&agent(who)).expect("an ASCII agent"),
    ));
    kube::Client::try_from(config).expect("a client")
}

/// Peak resident set of this process, in KiB.
pub fn peak_rss_kib() -> u64 {
    orkestra_test_support::bench::proc_status("self", "VmHWM:") as u64
}

/// A running process's resident memory in KiB, split: its own (`RssAnon`: heap, stacks) and
/// its files' (`RssFile`: mostly its code, shared with the page cache and given back under
/// pressure).
pub fn resident_kib(pid: u32) -> (f64, f64) {
    let field = |name| orkestra_test_support::bench::proc_status(&pid.to_string(), name);
    (field("RssAnon:"), field("RssFile:"))
}

/// Whether a CR's status says Ready.
pub fn is_ready(cr: &Value) -> bool {
    cr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Waits for stdin to close (the benchmark's signal to stop), then reports the peak RSS.
pub async fn until_stdin_closes() {
    tokio::task::spawn_blocking(|| {
        use std::io::BufRead;
        let mut line = String::new();
        while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {
            line.clear();
        }
    })
    .await
    .expect("stdin");
}

/// How one contender is started.
pub enum Start {
    /// This benchmark again, as `--phase NAME ARG`.
    Phase,
    /// A program built beforehand, given these arguments, then the argument.
    Program(PathBuf, Vec<String>),
}

/// Builds `binary` of the workspace's `package` with the release profile, as it ships (so a
/// contender's memory is its own program's, not this benchmark's binary's), in a target
/// directory the contenders' programs share (this benchmark's own is locked by the cargo that
/// runs it); `None` (with the reason printed) when it cannot be built.
pub fn build_release(package: &str, binary: &str) -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = workspace.join("target/bench/programs");
    eprintln!("building {binary} (cargo build --release -p {package}; minutes the first time)");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--locked",
            "--quiet",
            "-p",
            package,
            "--target-dir",
        ])
        .arg(&target)
        .current_dir(&workspace)
        .status();
    match built {
        Ok(status) if status.success() => Some(target.join("release").join(binary)),
        Ok(status) => {
            eprintln!("{binary} left out: cargo build exited with {status}");
            None
        }
        Err(error) => {
            eprintln!("{binary} left out: cannot run cargo: {error}");
            None
        }
    }
}

/// Builds the Go contender; `None` (with the reason printed) when it cannot be built here.
pub fn build_controller_runtime() -> Option<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/contenders/controller-runtime");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench/controller-runtime");
    eprintln!("building the controller-runtime contender (go build; a few minutes the first time)");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&source)
        .status();
    match built {
        Ok(status) if status.success() => Some(out),
        Ok(status) => {
            eprintln!("controller-runtime contender left out: go build exited with {status}");
            None
        }
        Err(error) => {
            eprintln!("controller-runtime contender left out: cannot run go: {error}");
            None
        }
    }
}

/// Spawns a contender (its clock should start before this) against `kubeconfig`, with
/// `arg` and `env`; its stdin is the stop signal, its stdout what it reports.
pub fn spawn(start: &Start, which: &str, arg: &str, kubeconfig: &Path, env: &[(&str, String)]) -> Child {
    let mut command = match start {
        Start::Phase => {
            let mut command = Command::new(std::env::current_exe().expect("this benchmark"));
            command.args(["--phase", which, arg]);
            command
        }
        Start::Program(path, leading) => {
            let mut command = Command::new(path);
            command.args(leading).arg(arg);
            command
        }
    };
    command
        .env("KUBECONFIG", kubeconfig)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // A contender's log only when a benchmark is asked to show it (`BENCH_TRACE`).
        .stderr(match std::env::var_os("BENCH_TRACE") {
            Some(_) => Stdio::inherit(),
            None => Stdio::null(),
        })
        .spawn()
        .expect("the contender's process")
}

/// What a contender printed as `key=value` on its stdout, once it has exited.
pub fn reported(stdout: &[u8], key: &str) -> Option<String> {
    let prefix = format!("{key}=");
    String::from_utf8_lossy(stdout)
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()).map(String::from))
}
