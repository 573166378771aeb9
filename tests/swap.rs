//! A fresh instance per call must never see an earlier call's memory, even when the kernel
//! swaps a page out while that call runs (one tenant's CR would otherwise reach the next
//! call of the same component). wasmtime 48 resets a returned memory after a `PAGEMAP_SCAN`
//! that misses swapped-out pages, so the host does not use that reset while swap is on.
//! The test turns on a swap file of its own and pages the whole process out while calls
//! run, so it is its own test binary, and it needs root (swapon).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use orkestra_test_support::guests;
use orkestra_wasm::{CallStats, Caller, Gvk, Hook, Request, WasmHost};

/// A swap file, on while this lives.
struct SwapFile(PathBuf);

impl SwapFile {
    /// `None` where the kernel refuses to turn swap on (a container without the privilege).
    fn on(path: PathBuf) -> Option<Self> {
        let run = |program: &str, args: &[&str]| {
            let status = Command::new(program).args(args).arg(&path).status();
            status.is_ok_and(|s| s.success())
        };
        // swapon refuses a sparse file: fallocate, not set_len.
        assert!(run("fallocate", &["-l", "256M"]), "fallocate {}", path.display());
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        assert!(run("mkswap", &["-q"]), "mkswap {}", path.display());
        let on = run("swapon", &[]);
        // Removed on drop either way.
        let swap = Self(path);
        on.then_some(swap)
    }
}

impl Drop for SwapFile {
    fn drop(&mut self) {
        let _ = Command::new("swapoff").arg(&self.0).status();
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Asks the kernel to page out every private writable mapping of this process, as memory
/// pressure would, every 20 ms until `stop`.
fn page_out_until(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
            for line in maps.lines() {
                let mut fields = line.split_whitespace();
                let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
                    continue;
                };
                let Some((start, end)) = range.split_once('-') else {
                    continue;
                };
                if !(perms.starts_with("rw") && perms.ends_with('p')) {
                    continue;
                }
                let (Ok(start), Ok(end)) = (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16)) else {
                    continue;
                };
                // SAFETY: MADV_PAGEOUT only moves pages to swap; their contents stay.
                unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_PAGEOUT) };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

/// What the hostile component's `remember` mode found, call after call with a new key.
async fn remembered(host: &WasmHost, path: &Path) -> Vec<String> {
    let spec = guests::hook_spec(path.to_str().unwrap(), None).unwrap();
    let loaded = host.load(&spec).await.unwrap();
    let stats = CallStats::default();
    let mut seen = Vec::new();
    for i in 0..4 {
        let key = format!("tenant-{i}/secret-{i}");
        let request = Request {
            key: key.clone(),
            gvk: Gvk {
                group: "swap.orkestra.io".into(),
                version: "v1".into(),
                kind: "Probe".into(),
            },
            target: None,
            object: Some(r#"{"spec":{"mode":"remember"}}"#.into()),
            event_id: None,
            sentinels: Vec::new(),
            context: "{}".into(),
        };
        let caller = Caller {
            component: "hostile".into(),
            key,
            namespace: None,
            manager: "orkestra-wasm/test".into(),
            client: None,
            owner_uid: None,
            writes: Default::default(),
        };
        let response = host
            .call(&loaded, &spec, Hook::Reconcile, caller, &request, &stats)
            .await;
        let status = response.unwrap().unwrap().status.unwrap();
        let status: serde_json::Value = serde_json::from_str(&status).unwrap();
        seen.push(status["seen"].as_str().unwrap().to_string());
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_swapped_out_during_a_call_does_not_reach_the_next_one() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: turning swap on needs root");
        return;
    }
    let component = guests::component("hostile").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let host = |dir: &str| WasmHost::new(None, reqwest::Client::new(), cache.path().join(dir)).unwrap();
    // Started before swap was on: where the kernel has PAGEMAP_SCAN, it resets in place.
    let before = host("before");
    let Some(swap) = SwapFile::on(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("orkestra-swap-test")) else {
        eprintln!("skipped: the kernel refused swapon");
        return;
    };
    let after = host("after");
    assert!(!after.resident, "swap is on: the host must not reset memories in place");

    let stop = Arc::new(AtomicBool::new(false));
    let pager = page_out_until(stop.clone());
    let fresh = remembered(&after, &component).await;
    let stale = if before.resident {
        Some(remembered(&before, &component).await)
    } else {
        None
    };
    stop.store(true, Ordering::Relaxed);
    pager.join().unwrap();
    drop(swap);

    assert!(
        fresh.iter().all(String::is_empty),
        "a call saw an earlier one's memory: {fresh:?}"
    );
    // The hazard is real where the in-place reset is in use: without it this test would
    // prove nothing. When wasmtime resets swapped-out pages (past 48), this fails: the host's
    // swap check can then go.
    if let Some(stale) = stale {
        assert!(
            stale.iter().any(|seen| seen.starts_with("tenant-")),
            "no page reached swap in time, or wasmtime now resets swapped-out pages: {stale:?}"
        );
    }
}
