//! The threads of one tenant's file reads. wasmtime-wasi reads a granted file on a blocking
//! thread of the tokio runtime the call runs on, and a read that never returns (a FIFO
//! nobody writes to) keeps its thread after the call has timed out. On the host's runtime,
//! enough of them would take every blocking thread, and with them hot swaps, reloads, DNS
//! and every other tenant's file reads. A component with file grants therefore runs its
//! calls on a runtime of its own ([`Pool`]): one worker and at most [`BLOCKING_THREADS`]
//! blocking threads, so what it pins is its own.

use std::future::Future;
use std::time::Duration;

/// Blocking threads one tenant's calls may hold.
pub const BLOCKING_THREADS: usize = 4;
/// How long an idle blocking thread is kept.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// A tenant's runtime; dropped without waiting for what it still runs (a stuck read).
pub struct Pool(Option<tokio::runtime::Runtime>);

impl Pool {
    /// The pool of the component `name` (its threads are named after it).
    pub fn new(name: &str) -> std::io::Result<Self> {
        let thread = format!("wasm-{}", name.replace('/', "-"));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(BLOCKING_THREADS)
            .thread_keep_alive(KEEP_ALIVE)
            .thread_name(thread.chars().take(15).collect::<String>())
            .enable_all()
            .build()?;
        Ok(Self(Some(runtime)))
    }

    /// Runs `work` on the pool (`None`: the pool is being dropped).
    pub fn spawn<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Option<tokio::task::JoinHandle<T>> {
        self.0.as_ref().map(|runtime| runtime.spawn(work))
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            // Never wait here: a thread stuck in a read would hold the host up with it.
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stuck_reads_pin_the_pools_threads_not_the_hosts() {
        let pool = Pool::new("stuck").unwrap();
        // More blocking reads than the pool has threads, each stuck until released.
        let mut releases = Vec::new();
        for _ in 0..BLOCKING_THREADS * 3 {
            let (release, released) = std::sync::mpsc::channel::<()>();
            releases.push(release);
            pool.spawn(async move {
                let _ = tokio::task::spawn_blocking(move || released.recv()).await;
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The host's own blocking threads are untouched.
        let free = tokio::time::timeout(Duration::from_secs(1), tokio::task::spawn_blocking(|| 7)).await;
        assert_eq!(free.unwrap().unwrap(), 7);
        // And dropping the pool does not wait for them.
        let started = std::time::Instant::now();
        drop(pool);
        assert!(started.elapsed() < Duration::from_secs(1));
        drop(releases);
    }
}
