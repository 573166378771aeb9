//! The one HTTP/1.1 server of every door. What a peer can hold is bounded:
//!
//! - a TLS handshake, a request's headers, and the wait for the next request on a kept-alive
//!   connection each have [`Limits::header_timeout`] (hyper's header timer runs from the
//!   moment a connection waits for a request, so it is the idle timeout too);
//! - a request, from its headers to its answer, has [`Limits::request_timeout`], after which
//!   it is answered 503; its body must arrive within [`Limits::pace`] (a deadline for the
//!   whole body and a minimum rate), or the read of it fails and the connection closes;
//! - connections are capped in total and per peer address. At a cap, the oldest connection
//!   that is not serving a request (idle, or still sending its headers) is closed at once to make
//!   room, and failing that one whose request's body is still arriving is cut off, each
//!   taken from the peer holding the most connections; only when every connection is
//!   serving a request is the new one refused. Holding thousands of idle connections, or dripping
//!   bodies into them, therefore costs the holder its own connections, not everyone's, and a
//!   probe or an admission call always gets in;
//! - bodies have a default limit ([`Limits::body_limit`]) that a route may lower or raise;
//! - what a burst of connections took is given back once it has passed ([`give_back`]): the
//!   allocator keeps freed memory for reuse, so ten thousand half-sent requests would
//!   otherwise leave the process that much larger for good.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::hosts::Hosts;
use crate::pace::{Pace, Paced, Receiving};

/// What one door lets a peer hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// A TLS handshake, a request's headers, and an idle connection's wait for its next request.
    pub header_timeout: Duration,
    /// A request from its headers to its answer.
    pub request_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections open at once from one address.
    pub max_per_peer: usize,
    /// Request bodies, unless a route says otherwise.
    pub body_limit: usize,
    /// How fast a request's body must arrive.
    pub pace: Pace,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_per_peer: 256,
            body_limit: 1 << 20,
            pace: Pace::default(),
        }
    }
}

/// A listener's setup.
#[derive(Clone)]
pub struct Door {
    /// For logs: "Live API", "webhooks", "Control Center".
    pub name: &'static str,
    pub limits: Limits,
    /// Answer only requests whose Host is one of these (`None`: any).
    pub hosts: Option<Hosts>,
    /// Serve HTTPS with this acceptor.
    pub tls: Option<TlsAcceptor>,
}

impl Door {
    /// Plain HTTP with the default limits, any Host.
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            limits: Limits::default(),
            hosts: None,
            tls: None,
        }
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn hosts(mut self, hosts: Option<Hosts>) -> Self {
        self.hosts = hosts;
        self
    }

    pub fn tls(mut self, tls: TlsAcceptor) -> Self {
        self.tls = Some(tls);
        self
    }
}

/// One open connection, as the caps see it.
struct Conn {
    peer: IpAddr,
    opened: Instant,
    /// Requests being served on it now, and those of them whose body is still arriving.
    busy: Arc<AtomicUsize>,
    receiving: Arc<AtomicUsize>,
    /// Told to close at once, to make room: it serves no request, or its request's body is
    /// still arriving.
    cut: Arc<Notify>,
}

/// What a connection's task watches of its registry entry.
struct Watch {
    id: u64,
    busy: Arc<AtomicUsize>,
    receiving: Arc<AtomicUsize>,
    cut: Arc<Notify>,
}

/// Every open connection of a door.
#[derive(Default)]
struct Registry {
    next: u64,
    conns: HashMap<u64, Conn>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Registry {
    /// Room for a connection from `peer`, made where a cap is reached by closing the oldest
    /// idle connection, else cutting one still receiving a body; `None` when every
    /// connection in the way is serving a request.
    fn admit(&mut self, peer: IpAddr, limits: &Limits) -> Option<Watch> {
        if self.per_peer.get(&peer).copied().unwrap_or(0) >= limits.max_per_peer && !self.make_room(Some(peer)) {
            return None;
        }
        if self.conns.len() >= limits.max_connections && !self.make_room(None) {
            return None;
        }
        let id = self.next;
        self.next += 1;
        let conn = Conn {
            peer,
            opened: Instant::now(),
            busy: Arc::default(),
            receiving: Arc::default(),
            cut: Arc::new(Notify::new()),
        };
        let watch = Watch {
            id,
            busy: conn.busy.clone(),
            receiving: conn.receiving.clone(),
            cut: conn.cut.clone(),
        };
        self.conns.insert(id, conn);
        *self.per_peer.entry(peer).or_default() += 1;
        Some(watch)
    }

    /// Closes one connection of `of` (any peer's: `None`) to make room, taken from the peer
    /// that holds the most (so a light peer's kept-alive connection, the API server's or a
    /// probe's, is never closed for a heavy one's): its oldest idle one, else its oldest still
    /// receiving a body.
    fn make_room(&mut self, of: Option<IpAddr>) -> bool {
        let per_peer = &self.per_peer;
        let victim = self
            .conns
            .iter()
            .filter(|(_, c)| of.is_none_or(|peer| c.peer == peer))
            .filter_map(|(id, c)| {
                let idle = c.busy.load(Ordering::Acquire) == 0;
                let receiving = c.receiving.load(Ordering::Acquire) > 0;
                let held = per_peer.get(&c.peer).copied().unwrap_or(0);
                (idle || receiving).then_some((std::cmp::Reverse(held), !idle, c.opened, *id))
            })
            .min()
            .map(|(_, _, _, id)| id);
        let Some(conn) = victim.and_then(|id| self.remove(id)) else {
            return false;
        };
        // At once, never gracefully: hyper's graceful close of a connection still reading a
        // request's headers waits out the header timeout, so a burst of half-sent requests
        // would hold connections (and their buffers) past the cap until then. A stored
        // permit: it closes even if it is not waiting yet.
        conn.cut.notify_one();
        true
    }

    fn remove(&mut self, id: u64) -> Option<Conn> {
        let conn = self.conns.remove(&id)?;
        if let Some(count) = self.per_peer.get_mut(&conn.peer) {
            *count -= 1;
            if *count == 0 {
                self.per_peer.remove(&conn.peer);
            }
        }
        Some(conn)
    }
}

/// Serves `router` on `listener` through `door` until `shutdown` resolves (or this future is
/// dropped); then every connection closes once its request in flight is answered.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    door: Door,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let router = router.layer(DefaultBodyLimit::max(door.limits.body_limit));
    let registry = Arc::new(Mutex::new(Registry::default()));
    let watcher = tokio::spawn(give_back(registry.clone()));
    let _watcher = AbortOnDrop(watcher);
    let door = Arc::new(door);
    // Dropped when serving ends, however it ends: every connection hears it and closes.
    let (serving, _) = tokio::sync::watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer): (_, SocketAddr) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, most likely: let connections close before trying again.
                tracing::debug!(door = door.name, %error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let admitted = registry.lock().admit(peer.ip(), &door.limits);
        let Some(watch) = admitted else {
            tracing::debug!(door = door.name, %peer, "connection refused: every connection is serving a request");
            continue;
        };
        let (router, door, registry) = (router.clone(), door.clone(), registry.clone());
        let mut ended = serving.subscribe();
        tokio::spawn(async move {
            let close = async {
                let _ = ended.changed().await;
            };
            let counts = (watch.busy.clone(), watch.receiving.clone());
            tokio::select! {
                () = connection(tcp, peer, router, &door, counts, close) => {}
                // Made room for another: dropped at once, a request still arriving unanswered.
                () = watch.cut.notified() => {
                    tracing::debug!(door = door.name, %peer, "connection closed to make room: it was idle, or its request was still arriving, and the door was full");
                }
            }
            registry.lock().remove(watch.id);
        });
    }
    Ok(())
}

/// Connections a burst must have reached for its passing to be worth a trim.
const BURST: usize = 256;

/// Watches the door's connections; when a burst of them has passed (down to an eighth of
/// its peak), hands the memory they took back to the system.
async fn give_back(registry: Arc<Mutex<Registry>>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut peak = 0usize;
    loop {
        tick.tick().await;
        let open = registry.lock().conns.len();
        peak = peak.max(open);
        if peak >= BURST && open <= peak / 8 {
            tracing::debug!(peak, open, "a burst of connections passed; giving its memory back");
            let _ = tokio::task::spawn_blocking(trim).await;
            peak = open;
        }
    }
}

/// Returns the allocator's free memory to the system, in every arena (glibc keeps what a
/// thread freed for that thread's next allocations otherwise).
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a padding and has no other precondition; it locks the
    // allocator's arenas itself.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Aborts the task when the server that started it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One connection, TLS first where the door has it, until it closes or `close` (the server
/// stopped) resolves.
async fn connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    router: axum::Router,
    door: &Door,
    counts: (Arc<AtomicUsize>, Arc<AtomicUsize>),
    close: impl Future<Output = ()>,
) {
    let limits = &door.limits;
    tokio::pin!(close);
    match &door.tls {
        None => http(TokioIo::new(tcp), peer, router, door, counts, close).await,
        Some(acceptor) => {
            let handshake = tokio::select! {
                () = &mut close => return,
                done = tokio::time::timeout(limits.header_timeout, acceptor.accept(tcp)) => done,
            };
            match handshake {
                Ok(Ok(tls)) => http(TokioIo::new(tls), peer, router, door, counts, close).await,
                Ok(Err(error)) => tracing::debug!(door = door.name, %peer, %error, "TLS handshake failed"),
                Err(_) => tracing::debug!(door = door.name, %peer, "TLS handshake timed out"),
            }
        }
    }
}

async fn http<I>(
    io: I,
    peer: SocketAddr,
    router: axum::Router,
    door: &Door,
    (busy, receiving): (Arc<AtomicUsize>, Arc<AtomicUsize>),
    close: impl Future<Output = ()>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let hosts = door.hosts.clone().map(Arc::new);
    let (deadline, pace) = (door.limits.request_timeout, door.limits.pace);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let (router, hosts, busy, receiving) = (router.clone(), hosts.clone(), busy.clone(), receiving.clone());
        async move {
            if let Some(hosts) = hosts.filter(|h| !h.admits(request.headers())) {
                return Ok::<_, Infallible>(plain(
                    StatusCode::MISDIRECTED_REQUEST,
                    format!("this door answers only for {}", hosts.describe()),
                ));
            }
            let _serving = Busy::start(busy);
            let request = request.map(|body| match hyper::body::Body::is_end_stream(&body) {
                true => Body::new(body),
                false => Body::new(Paced::new(body, pace, Receiving::start(&receiving))),
            });
            let answer = router.oneshot(request);
            Ok(match tokio::time::timeout(deadline, answer).await {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(_) => plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the request took longer than {}s", deadline.as_secs()),
                ),
            })
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(door.limits.header_timeout)
        .serve_connection(io, service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = close => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(door = door.name, %peer, %error, "connection ended with an error");
    }
}

/// Counts a request as in flight while it lives.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn start(busy: Arc<AtomicUsize>) -> Self {
        busy.fetch_add(1, Ordering::AcqRel);
        Self(busy)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn plain(status: StatusCode, message: String) -> Response<Body> {
    let mut response = Response::new(Body::from(message));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests;
