//! A TCP proxy on loopback in front of the API server, for fault tests: it adds latency to
//! every chunk in both directions and can cut every open connection at once. TLS passes
//! through untouched (the API server's certificate names 127.0.0.1).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy; it stops when dropped.
pub struct SlowProxy {
    pub port: u16,
    latency_ms: Arc<AtomicU64>,
    cut: watch::Sender<u64>,
    connections: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl SlowProxy {
    /// Forwards 127.0.0.1:PORT to `upstream` (`127.0.0.1:6443`).
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy port");
        let port = listener.local_addr().expect("proxy address").port();
        let latency_ms = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let (cut, _) = watch::channel(0u64);
        let task = tokio::spawn({
            let (latency_ms, cut, connections) = (latency_ms.clone(), cut.clone(), connections.clone());
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        continue;
                    };
                    connections.fetch_add(1, Ordering::Relaxed);
                    let (latency_ms, mut cuts) = (latency_ms.clone(), cut.subscribe());
                    tokio::spawn(async move {
                        let (client_read, client_write) = client.into_split();
                        let (server_read, server_write) = server.into_split();
                        tokio::select! {
                            () = pipe(client_read, server_write, latency_ms.clone()) => {}
                            () = pipe(server_read, client_write, latency_ms) => {}
                            _ = cuts.changed() => {}
                        }
                    });
                }
            }
        });
        Self {
            port,
            latency_ms,
            cut,
            connections,
            task,
        }
    }

    /// Every chunk waits this long before it is passed on.
    pub fn set_latency(&self, latency: Duration) {
        self.latency_ms.store(
            u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Closes every open connection (clients see their watches and requests drop).
    pub fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    latency_ms: Arc<AtomicU64>,
) {
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let latency = latency_ms.load(Ordering::Relaxed);
        if latency > 0 {
            tokio::time::sleep(Duration::from_millis(latency)).await;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
