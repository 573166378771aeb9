//! What the benchmarks that measure an `ork run` process share: the process itself (its
//! resident memory and open files, killed when dropped), percentiles of latencies, and the
//! probe latency of its `/healthz` on a fresh connection each time.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An `ork run` process and its Live API's address.
pub struct Host {
    pub child: Child,
    pub addr: String,
}

impl Host {
    /// `ork run -f katalog` (the binary `ork`) against the cluster of `kubeconfig`, its Live
    /// API open on a free loopback port, its output dropped.
    pub fn run(ork: &str, katalog: &Path, kubeconfig: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(ork)
            .args(["run", "-f", katalog.to_str().expect("a path"), "--http-addr", &addr])
            .env("KUBECONFIG", kubeconfig)
            .env("ORK_API_TOKEN", "")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ork starts");
        Self { child, addr }
    }

    /// A number field of `/proc/<pid>/status` (`VmRSS:`), in its unit (kB).
    pub fn status(&self, field: &str) -> f64 {
        proc_status(&self.child.id().to_string(), field)
    }

    pub fn rss_mib(&self) -> f64 {
        self.status("VmRSS:") / 1024.0
    }

    /// Descriptors the process holds open.
    pub fn files(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).map_or(0, |d| d.count())
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `q` quantile of `samples`, in ms (NaN without samples).
pub fn percentile(samples: &mut [Duration], q: f64) -> f64 {
    samples.sort();
    samples
        .get(((samples.len().saturating_sub(1)) as f64 * q) as usize)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

/// `count` probes of `/healthz` on a fresh connection each: p50 and p99 in ms, and how many
/// failed (no answer within 5 s, or not 2xx).
pub async fn probes(addr: &str, count: usize) -> (f64, f64, usize) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(0)
        .build()
        .expect("a client");
    let (mut took, mut failed) = (Vec::new(), 0);
    for _ in 0..count {
        let started = Instant::now();
        match http.get(format!("http://{addr}/healthz")).send().await {
            Ok(answer) if answer.status().is_success() => took.push(started.elapsed()),
            _ => failed += 1,
        }
    }
    (percentile(&mut took, 0.5), percentile(&mut took, 0.99), failed)
}

/// A number field (`VmHWM:`) of `/proc/<process>/status`, `process` a pid or `self`, in its
/// unit (kB); 0 when the process or the field is not there.
pub fn proc_status(process: &str, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{process}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}
