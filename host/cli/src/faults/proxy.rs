//! The fault-injecting proxy the runtime under test talks to: plain HTTP on loopback in
//! front of the real API server (reached with the campaign's own client, TLS and
//! credentials included). It counts the runtime's writes, and injects the fault armed now:
//! an answer of 409, 429 (with Retry-After) or 410 on a share of requests, watch events
//! delayed, sent twice or dropped (a dropped event ends its watch with 410 Gone, as an etcd
//! compaction would, so only a relist can recover it), or a write held after it reached the
//! API server until the campaign has killed the runtime.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use parking_lot::Mutex;

/// What the proxy does to the requests passing through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injection {
    None,
    /// Every `n`th write answered 409 Conflict without reaching the API server.
    Conflict {
        every: u64,
    },
    /// Every `n`th request answered 429 with `Retry-After: 1`.
    Throttle {
        every: u64,
    },
    /// Every `n`th watch answered 410 Gone.
    Gone {
        every: u64,
    },
    /// Each watch event held this long.
    Delay(Duration),
    /// Each watch event sent twice.
    Duplicate,
    /// Every `n`th watch event dropped, and its watch ended with 410 Gone.
    Drop {
        every: u64,
    },
    /// The `k`th write reaches the API server; its answer is held, and the campaign told.
    CrashAfterWrite {
        k: u64,
    },
}

/// The proxy's shared state: the armed injection and the counts.
pub struct Faults {
    injection: Mutex<Injection>,
    requests: AtomicU64,
    writes: AtomicU64,
    watches: AtomicU64,
    events: AtomicU64,
    injected: AtomicU64,
    /// What the runtime wrote since the injection was armed: method and path, in order.
    written: Mutex<Vec<(Method, String)>>,
    /// Set when a write held by [`Injection::CrashAfterWrite`] reached the API server.
    crashed: tokio::sync::watch::Sender<bool>,
}

impl Faults {
    pub fn arm(&self, injection: Injection) {
        *self.injection.lock() = injection;
        self.writes.store(0, Ordering::SeqCst);
        self.injected.store(0, Ordering::SeqCst);
        self.written.lock().clear();
        self.crashed.send_replace(false);
    }

    /// What the runtime deleted since the injection was armed.
    pub fn deletes(&self) -> Vec<String> {
        let written = self.written.lock();
        written
            .iter()
            .filter(|(method, _)| *method == Method::DELETE)
            .map(|(_, path)| path.clone())
            .collect()
    }

    /// The `n` writes the runtime made most often since the injection was armed (`METHOD
    /// path`, how many times), the most first.
    pub fn most_written(&self, n: usize) -> Vec<(String, usize)> {
        let mut counts = std::collections::BTreeMap::<String, usize>::new();
        for (method, path) in self.written.lock().iter() {
            *counts.entry(format!("{method} {path}")).or_default() += 1;
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        counts.truncate(n);
        counts
    }

    /// Stops injecting; the counts go on.
    pub fn disarm(&self) {
        *self.injection.lock() = Injection::None;
    }

    fn injection(&self) -> Injection {
        *self.injection.lock()
    }

    /// Writes of the runtime since the injection was armed (those refused by a fault too).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// Faults injected since it was armed.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    /// Waits until the write to crash after has reached the API server (at once if it
    /// has already).
    pub async fn crashed(&self) {
        let _ = self.crashed.subscribe().wait_for(|crashed| *crashed).await;
    }

    fn inject(&self) {
        self.injected.fetch_add(1, Ordering::SeqCst);
    }
}

/// A running proxy; it stops with the campaign.
pub struct Proxy {
    pub port: u16,
    pub faults: Arc<Faults>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Shared {
    upstream: kube::Client,
    faults: Arc<Faults>,
}

impl Proxy {
    /// Listens on loopback, forwarding to the API server of `upstream`.
    pub async fn start(upstream: kube::Client) -> anyhow::Result<Self> {
        let faults = Arc::new(Faults {
            injection: Mutex::new(Injection::None),
            requests: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            watches: AtomicU64::new(0),
            events: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            written: Mutex::default(),
            crashed: tokio::sync::watch::Sender::new(false),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let shared = Shared {
            upstream,
            faults: faults.clone(),
        };
        let router = axum::Router::new().fallback(forward).with_state(shared);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self { port, faults, task })
    }

    /// A kubeconfig that points at the proxy (no credentials: the proxy holds them).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: faults\n  cluster: {{server: \"http://127.0.0.1:{}\"}}\nusers:\n- name: runtime\n  user: {{}}\ncontexts:\n- name: faults\n  context: {{cluster: faults, user: runtime, namespace: default}}\ncurrent-context: faults\n",
            self.port
        )
    }
}

fn is_watch(request: &Request) -> bool {
    let query = request.uri().query().unwrap_or_default();
    form_pairs(query).any(|(key, value)| key == "watch" && (value == "true" || value == "1"))
}

fn form_pairs(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query.split('&').filter_map(|pair| pair.split_once('='))
}

/// A Status answer of `code`, as the API server writes one.
fn status(code: StatusCode, reason: &str, retry_after: bool) -> Response {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": format!("injected by ork test --faults: {reason}"),
        "reason": reason, "code": code.as_u16(),
    });
    let mut response = (code, axum::Json(body)).into_response();
    if retry_after {
        response
            .headers_mut()
            .insert("retry-after", http::HeaderValue::from_static("1"));
    }
    response
}

/// The `n`th of a count (starting at 1) is a multiple of `every`.
fn nth(counter: &AtomicU64, every: u64) -> bool {
    let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
    every > 0 && n.is_multiple_of(every)
}

async fn forward(State(shared): State<Shared>, request: Request) -> Response {
    let faults = &shared.faults;
    let write = !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let watch = is_watch(&request);
    let injection = faults.injection();
    if write {
        let record = (request.method().clone(), request.uri().path().to_string());
        faults.written.lock().push(record);
    }
    let n = faults.requests.fetch_add(1, Ordering::SeqCst) + 1;
    // This write's number (0: not a write), its own even when writes race.
    let mut nth_write = 0;
    if write {
        nth_write = faults.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if let Injection::Conflict { every } = injection
            && every > 0
            && nth_write.is_multiple_of(every)
        {
            faults.inject();
            return status(StatusCode::CONFLICT, "Conflict", false);
        }
    }
    match injection {
        Injection::Throttle { every } if every > 0 && n.is_multiple_of(every) => {
            faults.inject();
            return status(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", true);
        }
        Injection::Gone { every } if watch && nth(&faults.watches, every) => {
            faults.inject();
            return status(StatusCode::GONE, "Expired", false);
        }
        _ => {}
    }
    let crash_here = write && matches!(injection, Injection::CrashAfterWrite { k } if nth_write == k);
    let upstream = match upstream_request(request).await {
        Ok(request) => request,
        Err(error) => return (StatusCode::BAD_REQUEST, error).into_response(),
    };
    let response = match shared.upstream.send(upstream).await {
        Ok(response) => response,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    if crash_here {
        faults.inject();
        faults.crashed.send_replace(true);
        // The runtime never hears of it: it is killed before this answers.
        std::future::pending::<()>().await;
    }
    let (parts, body) = response.into_parts();
    let body = match watch {
        true => Body::from_stream(events(body, shared.faults.clone(), injection)),
        false => Body::new(body.map_err(axum::Error::new)),
    };
    Response::from_parts(parts, body)
}

/// The request for the API server: its method, path, query, body and the headers that say
/// what it is (never the runtime's own credentials: it has none).
async fn upstream_request(request: Request) -> Result<http::Request<kube::client::Body>, String> {
    let (parts, body) = request.into_parts();
    let bytes = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut upstream = http::Request::builder()
        .method(parts.method)
        .uri(path)
        .body(kube::client::Body::from(bytes.to_vec()))
        .map_err(|e| e.to_string())?;
    *upstream.headers_mut() = passed(&parts.headers);
    Ok(upstream)
}

fn passed(headers: &HeaderMap) -> HeaderMap {
    let mut kept = HeaderMap::new();
    for (name, value) in headers {
        let name_text = name.as_str();
        if name_text == "content-type" || name_text == "accept" || name_text.starts_with("impersonate-") {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}

/// A watch's events, line by line, as the armed injection changes them.
fn events(
    body: kube::client::Body,
    faults: Arc<Faults>,
    injection: Injection,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    let lines = body
        .into_data_stream()
        .map(|chunk| chunk.map_err(std::io::Error::other));
    let mut pending = Vec::new();
    let mut ended = false;
    lines
        .flat_map(move |chunk| {
            let mut out: Vec<Result<Bytes, std::io::Error>> = Vec::new();
            match chunk {
                Err(error) => out.push(Err(error)),
                Ok(bytes) if !ended => {
                    pending.extend_from_slice(&bytes);
                    while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=end).collect();
                        match injection {
                            Injection::Duplicate => {
                                faults.inject();
                                out.push(Ok(Bytes::from(line.clone())));
                                out.push(Ok(Bytes::from(line)));
                            }
                            // Nothing after it: the watcher must relist to learn what it missed.
                            Injection::Drop { every } if nth(&faults.events, every) => {
                                faults.inject();
                                out.push(Ok(Bytes::from_static(GONE_EVENT)));
                                ended = true;
                                break;
                            }
                            _ => out.push(Ok(Bytes::from(line))),
                        }
                    }
                }
                Ok(_) => {}
            }
            futures::stream::iter(out)
        })
        .then(move |item| async move {
            if let Injection::Delay(delay) = injection {
                tokio::time::sleep(delay).await;
            }
            item
        })
}

/// What the API server sends when a watch's resourceVersion is too old.
const GONE_EVENT: &[u8] = b"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"injected by ork test --faults: too old resource version\",\"reason\":\"Expired\",\"code\":410}}\n";
