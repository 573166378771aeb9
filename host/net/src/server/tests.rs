use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

fn small() -> Limits {
    Limits {
        header_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(1),
        max_connections: 8,
        max_per_peer: 4,
        body_limit: 16,
        pace: Pace::default(),
    }
}

async fn start(door: Door) -> SocketAddr {
    let router = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/slow",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route("/echo", axum::routing::post(|body: String| async move { body }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, router, door, std::future::pending()));
    addr
}

#[tokio::test]
async fn a_stopped_server_closes_its_kept_alive_connections() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
    let server = tokio::spawn(serve(listener, router, Door::new("test"), std::future::pending()));
    let mut kept = TcpStream::connect(addr).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 256];
    let n = kept.read(&mut answer).await.unwrap();
    assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 200"));
    server.abort();
    let closed = tokio::time::timeout(Duration::from_secs(2), kept.read(&mut answer)).await;
    assert!(matches!(closed, Ok(Ok(0))), "{closed:?}");
}

/// One request on a fresh connection: the status line, or why there was none.
async fn ask(addr: SocketAddr, request: &str) -> Result<String, String> {
    let mut socket = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    socket.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut answer)).await;
    read.map_err(|_| "no answer".to_string())?.map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&answer).into_owned();
    text.lines().next().map(String::from).ok_or_else(|| "closed".into())
}

const PROBE: &str = "GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";

#[tokio::test]
async fn idle_connections_make_room_for_a_probe_at_every_cap() {
    let addr = start(Door::new("test").limits(small())).await;
    // Far more idle connections than either cap, from one peer.
    let mut idle = Vec::new();
    for _ in 0..40 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(ask(addr, PROBE).await.unwrap(), "HTTP/1.1 200 OK");
    // The idle ones were closed to make room: all but the cap's worth read EOF.
    let mut closed = 0;
    for mut socket in idle {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(200), socket.read(&mut byte)).await {
            closed += 1;
        }
    }
    assert!(closed >= 40 - 4, "{closed} of 40 idle connections closed");
}

#[tokio::test]
async fn half_sent_requests_past_the_cap_are_closed_at_once_not_at_their_header_timeout() {
    let addr = start(Door::new("test").limits(small())).await;
    let mut held = Vec::new();
    for _ in 0..40 {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-pad: aaaa")
            .await
            .unwrap();
        held.push(socket);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Well within the 2 s header timeout, all but the cap's worth are gone.
    let mut closed = 0;
    for mut socket in held {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_millis(200), socket.read(&mut byte)).await {
            closed += 1;
        }
    }
    assert!(closed >= 40 - 4, "{closed} of 40 half-sent requests closed");
}

#[tokio::test]
async fn busy_connections_are_kept_and_a_request_has_a_deadline() {
    let limits = Limits {
        request_timeout: Duration::from_secs(30),
        ..small()
    };
    let addr = start(Door::new("test").limits(limits)).await;
    let slow = "GET /slow HTTP/1.1\r\nhost: localhost\r\n\r\n";
    let mut busy = Vec::new();
    for _ in 0..4 {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket.write_all(slow.as_bytes()).await.unwrap();
        busy.push(socket);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Every slot of this peer serves a request: the new connection is refused, not queued.
    assert!(ask(addr, PROBE).await.is_err(), "a fifth connection from the same peer");
    drop(busy);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ask(addr, PROBE).await.unwrap(), "HTTP/1.1 200 OK");

    let addr = start(Door::new("test").limits(small())).await;
    let answer = ask(
        addr,
        "GET /slow HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(answer.unwrap(), "HTTP/1.1 503 Service Unavailable", "after its 1 s");
}

#[tokio::test]
async fn bodies_that_drip_cost_only_their_own_connections_and_are_cut_at_their_pace() {
    let limits = Limits {
        request_timeout: Duration::from_secs(30),
        body_limit: 1 << 20,
        pace: Pace {
            deadline: Duration::from_secs(3),
            min_rate: 1000,
            grace: Duration::from_secs(1),
        },
        ..small()
    };
    let addr = start(Door::new("test").limits(limits)).await;
    // Every connection the door and the peer may hold, each sending a body a byte at a
    // time: each is serving a request, none idle.
    let drip = "POST /echo HTTP/1.1\r\nhost: localhost\r\ncontent-length: 1000\r\n\r\nx";
    let mut dripping = Vec::new();
    for _ in 0..8 {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket.write_all(drip.as_bytes()).await.unwrap();
        dripping.push(socket);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    assert_eq!(ask(addr, PROBE).await.unwrap(), "HTTP/1.1 200 OK", "the probe gets in");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    // The ones left are cut at their pace, not at the request's 30 s.
    let mut closed = 0;
    for mut socket in dripping {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut rest)).await;
        if read.is_ok() {
            closed += 1;
        }
    }
    assert_eq!(closed, 8, "every dripping body was cut within its pace");
    // A body that arrives whole is read and answered.
    let whole = "POST /echo HTTP/1.1\r\nhost: localhost\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello";
    assert_eq!(ask(addr, whole).await.unwrap(), "HTTP/1.1 200 OK");
}

#[tokio::test]
async fn slow_headers_and_large_bodies_are_cut_off() {
    let addr = start(Door::new("test").limits(small())).await;
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket.write_all(b"GET /healthz HTTP/1.1\r\nhost: local").await.unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut rest)).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "closed after the 2 s header timeout"
    );
    let big = "POST /echo HTTP/1.1\r\nhost: localhost\r\ncontent-length: 64\r\nconnection: close\r\n\r\n";
    let body = "x".repeat(64);
    let answer = ask(addr, &format!("{big}{body}")).await.unwrap();
    assert_eq!(answer, "HTTP/1.1 413 Payload Too Large");
}

#[tokio::test]
async fn a_door_with_hosts_answers_only_those() {
    let addr = start(Door::new("test").limits(small()).hosts(Some(Hosts::loopback()))).await;
    assert_eq!(ask(addr, PROBE).await.unwrap(), "HTTP/1.1 200 OK");
    let rebound = "GET /healthz HTTP/1.1\r\nhost: attacker.example\r\nconnection: close\r\n\r\n";
    assert_eq!(ask(addr, rebound).await.unwrap(), "HTTP/1.1 421 Misdirected Request");
}
