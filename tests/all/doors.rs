//! Every listener is a door (issue 33, findings 2, 4 and 5): held open by idle connections,
//! reached under another Host, posted to from another site, or fed an endless answer, each
//! keeps serving the one it is for.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::HeaderMap;
use futures::StreamExt;
use orkestra_control_center::runtimes::Tokens;
use orkestra_gateway::webhooks::Webhooks;
use orkestra_test_support::{eventually, idle, kubectl_with, namespace};
use serde_json::json;

use crate::pipeline::{Harness, WAIT, crd};

fn admission_katalog(ns: &str, group: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: doors-{ns}}}
security:
  webhooks:
    admission: {{enabled: true}}
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site, plural: sites}}
      namespace: {ns}
      admission:
        validation:
          rules:
            - {{field: spec.image, prefix: 'myorg/', message: 'images come from myorg/'}}
      operatorBox: {{}}
"
    )
}

// kubectl blocks its thread while the webhooks, in this process, answer the API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_calls_are_answered_while_hundreds_of_idle_tls_connections_are_held() {
    let ns = namespace("doors-hook").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let group = format!("{}.doors.orkestra.io", ns.name);
    let text = admission_katalog(&ns.name, &group);
    let compiled = orkestra_katalog::load_sources(&[("k.yaml".into(), text)]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let options = crate::policies::options(&ns.name);
    let webhooks = Webhooks::start(ns.client.clone(), Arc::new(compiled), options)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let apply = |name: &str, image: &str| {
        let manifest = json!({"apiVersion": format!("{group}/v1"), "kind": "Site",
                              "metadata": {"name": name, "namespace": ns.name}, "spec": {"image": image}});
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, manifest.to_string()).unwrap();
        kubectl_with(&cluster.kubeconfig, &["apply", "-f", file.to_str().unwrap()]).map_err(|e| e.to_string())
    };
    eventually("the webhook to refuse a bad image", WAIT, || async {
        apply("first", "nginx").err()
    })
    .await
    .unwrap();

    // Far more idle connections, each past its TLS handshake, than the server has slots.
    let mut held = idle::tls(webhooks.addr, 600).await;
    assert!(held.len() >= 500, "{} connections held", held.len());
    let started = Instant::now();
    let refused = apply("bad", "nginx").unwrap_err();
    assert!(
        refused.contains("images come from myorg/"),
        "the rule answered, not a timeout: {refused}"
    );
    apply("good", "myorg/web").unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    // The idle ones paid for the room, not the API server.
    let mut closed = 0;
    for connection in &mut held {
        if connection.closed(Duration::from_millis(50)).await {
            closed += 1;
        }
    }
    assert!(closed > 0, "idle connections were closed to make room");
    webhooks.stop().await;
}

/// The Live API of `h`, open (no token) on a loopback port, as `ork run` serves it there.
async fn open_live_api(h: &Harness) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let auth = orkestra::live::Auth::open();
    let hosts = auth.hosts(addr);
    let router = orkestra::live::router(h.inspect.clone(), None, auth);
    tokio::spawn(orkestra::live::serve(listener, router, hosts));
    addr
}

#[tokio::test]
async fn the_live_api_answers_its_probes_while_thousands_of_idle_connections_are_held() {
    let h = Harness::start(
        "doors-live",
        &crd("plain", "Plain", "        reconcile: {}\n"),
        &[],
        true,
    )
    .await;
    let addr = open_live_api(&h).await;
    let mut held = idle::plain(addr, 3000).await;
    assert_eq!(held.len(), 3000);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    for _ in 0..5 {
        let started = Instant::now();
        let probe = http.get(format!("http://{addr}/healthz")).send().await.unwrap();
        assert_eq!(probe.status(), 200);
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    }
    let mut closed = 0;
    for connection in &mut held {
        if connection.closed(Duration::from_millis(20)).await {
            closed += 1;
        }
    }
    // The server keeps at most its cap (1,024) open: the rest were closed for the probes.
    assert!(
        closed >= 3000 - 1024,
        "only {closed} of 3000 idle connections were closed"
    );

    // Open on loopback: a page elsewhere cannot rebind its own name to it and read the CRs.
    let rebound = http
        .get(format!("http://{addr}/katalog"))
        .header("host", "attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 421);
    assert_eq!(
        http.get(format!("http://{addr}/katalog"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

/// A runtime's Live API that records the Authorization header of every request it gets;
/// `/katalog` answers `katalog` bytes of a JSON string when asked to, else a small Katalog.
#[derive(Clone, Default)]
struct FakeRuntime {
    seen: Arc<Mutex<Vec<Option<String>>>>,
    endless: bool,
    /// Another service's JSON, with no Katalog in it.
    stranger: bool,
}

async fn fake_katalog(State(fake): State<FakeRuntime>, headers: HeaderMap) -> axum::response::Response {
    use axum::response::IntoResponse;
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    fake.seen.lock().unwrap().push(auth);
    if fake.stranger {
        return axum::Json(json!({"status": "ok", "version": "3.1"})).into_response();
    }
    if !fake.endless {
        return axum::Json(json!({"name": "fake", "crds": []})).into_response();
    }
    // A JSON string that never ends (64 MiB of it, with no length given).
    let chunks =
        futures::stream::iter(std::iter::once(b"\"".to_vec()).chain(std::iter::repeat_n(vec![b'x'; 1 << 20], 64)))
            .map(Ok::<_, std::io::Error>);
    axum::body::Body::from_stream(chunks).into_response()
}

async fn fake_runtime(fake: FakeRuntime) -> String {
    let app = axum::Router::new()
        .route("/katalog", axum::routing::get(fake_katalog))
        .route("/components", axum::routing::get(|| async { axum::Json(json!([])) }))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// A Control Center without a login on loopback, as the README runs it, whose runtime token
/// is `runtime-secret`; its `/controlcenter` URL.
async fn control_center(runtimes: Vec<orkestra_control_center::config::RuntimeConfig>) -> String {
    let options = orkestra_control_center::Options {
        addr: "127.0.0.1:0".parse().unwrap(),
        runtimes,
        config_file: None,
        tokens: Tokens {
            default: Some("runtime-secret".into()),
            ..Tokens::default()
        },
        login: orkestra_control_center::login::Login::none(),
        hosts: Vec::new(),
        poll: Duration::from_millis(300),
        discovered: None,
        gateways: Vec::new(),
    };
    crate::control_center::serve(options).await
}

#[tokio::test]
async fn a_cross_site_form_adds_no_runtime_and_no_token_goes_where_it_was_not_sent() {
    let fake = FakeRuntime::default();
    let target = fake_runtime(fake.clone()).await;
    let cc = control_center(Vec::new()).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // Another site's page posts the form: the runtime at its address, the Control Center's
    // environment as its token (PATH stands for AWS_SECRET_ACCESS_KEY).
    let form = [("url", target.as_str()), ("name", "evil"), ("tokenEnv", "PATH")];
    let cross = http
        .post(format!("{cc}/runtimes"))
        .header("origin", "http://attacker.example")
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);
    // The Control Center's own page: its cookie and field.
    let page = http.get(format!("{cc}/runtimes")).send().await.unwrap();
    let cookie = page.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let token = cookie.split_once('=').unwrap().1.to_string();
    let body = page.text().await.unwrap();
    assert!(
        body.contains(&format!("value=\"{token}\"")),
        "the form carries the token"
    );
    let same_site = |form: Vec<(&'static str, String)>| {
        http.post(format!("{cc}/runtimes"))
            .header("origin", cc.trim_end_matches("/controlcenter"))
            .header("cookie", &cookie)
            .form(&form)
            .send()
    };
    let named = same_site(vec![
        ("url", target.clone()),
        ("name", "evil".into()),
        ("tokenEnv", "PATH".into()),
        ("csrf", token.clone()),
    ])
    .await
    .unwrap();
    assert_eq!(named.status(), 422, "a variable the operator did not allow");
    assert!(named.text().await.unwrap().contains("--allow-token-env"));
    let added = same_site(vec![("url", target.clone()), ("name", "spare".into()), ("csrf", token)])
        .await
        .unwrap();
    assert_eq!(added.status(), 303);
    eventually("the added runtime to be polled", WAIT, || async {
        (!fake.seen.lock().unwrap().is_empty()).then_some(())
    })
    .await
    .unwrap();
    let seen = fake.seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(Option::is_none),
        "no token went to a runtime added at run time: {seen:?}"
    );
    // Reached under another name (DNS rebinding), it does not answer.
    let rebound = http
        .get(format!("{cc}/"))
        .header("host", "attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 421);
}

#[tokio::test]
async fn a_runtime_that_answers_without_end_is_read_no_further_than_the_limit() {
    let fake = FakeRuntime {
        endless: true,
        ..FakeRuntime::default()
    };
    let url = fake_runtime(fake.clone()).await;
    let config = orkestra_control_center::config::RuntimeConfig::new(&url, Some("endless"), None).unwrap();
    let cc = control_center(vec![config]).await;
    // The runtime given at start gets the runtime token.
    let seen = first_runtime_in_error(&cc).await;
    let error = seen["lastError"].as_str().unwrap();
    assert!(error.contains("larger than the 16777216 bytes"), "{error}");
    assert_eq!(seen["up"], false);
    let tokens = fake.seen.lock().unwrap().clone();
    assert_eq!(tokens[0].as_deref(), Some("Bearer runtime-secret"));
}

/// The Control Center's view of its first runtime, once it has an error to show.
async fn first_runtime_in_error(cc: &str) -> serde_json::Value {
    let api = reqwest::Client::new();
    eventually("the runtime shown with an error", WAIT, || async {
        let answer: serde_json::Value = api
            .get(format!("{cc}/api/runtimes"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let runtime = answer["runtimes"][0].clone();
        runtime["lastError"].is_string().then_some(runtime)
    })
    .await
    .unwrap()
}

/// Issue 50, item 4: another service on a runtime's address is named for what it is, not
/// shown as a runtime without a Katalog.
#[tokio::test]
async fn a_service_that_is_not_a_runtime_is_said_to_be_so() {
    let fake = FakeRuntime {
        stranger: true,
        ..FakeRuntime::default()
    };
    let url = fake_runtime(fake).await;
    let config = orkestra_control_center::config::RuntimeConfig::new(&url, Some("stranger"), None).unwrap();
    let cc = control_center(vec![config]).await;
    let seen = first_runtime_in_error(&cc).await;
    let error = seen["lastError"].as_str().unwrap();
    assert!(error.contains("not an Orkestra runtime's Live API"), "{error}");
    assert_eq!(seen["up"], false);
    assert!(seen["katalog"].is_null(), "{seen}");
}

/// Resident memory of process `pid`, in MiB.
fn rss_mib(pid: i32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024.0
}

/// Issue 49, finding 10: ten thousand half-sent requests left the runtime 118 MB larger after
/// their connections were gone. What a burst of connections took is given back once they
/// close.
#[tokio::test]
async fn memory_a_burst_of_half_sent_requests_took_is_given_back() {
    use tokio::io::AsyncWriteExt as _;
    let ns = namespace("doors-burst").await.unwrap();
    let group = format!("{}.burst.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {{name: burst}}\nspec:\n  crds:\n    site:\n      apiTypes: {{group: {group}, version: v1, kind: Site}}\n      operatorBox: {{}}\n"
    );
    let (_dir, file) = crate::running::katalog_file(&ns, &katalog).await;
    let (ork, addr) = crate::running::ork_run(&file, &ns, &[], &[("ORK_API_TOKEN", "")]);
    let addr: SocketAddr = addr.parse().unwrap();
    let pid = ork.pid();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_mib(pid);
    // Ten rounds of a thousand: each request cut off half way through its headers.
    for _ in 0..10 {
        let mut held = Vec::new();
        for i in 0..1000 {
            let source = std::net::Ipv4Addr::new(127, 0, 1, 1 + (i / 200) as u8);
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(SocketAddr::new(source.into(), 0)).unwrap();
            if let Ok(mut stream) = socket.connect(addr).await {
                let _ = stream
                    .write_all(b"POST /katalog HTTP/1.1\r\nhost: localhost\r\ncontent-length: 4096\r\nx-half: ")
                    .await;
                held.push(stream);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(held);
    }
    let peak = rss_mib(pid);
    // The connections are gone; the door has seen them go.
    let settled = eventually(
        "the runtime's memory back near where it was",
        Duration::from_secs(30),
        || async {
            let now = rss_mib(pid);
            (now < before + 24.0).then_some(now)
        },
    )
    .await;
    eprintln!("RSS before {before:.1} MiB, after the bursts {peak:.1} MiB, settled {settled:?}");
    assert!(settled.is_ok(), "before {before:.1} MiB, after {:.1} MiB", rss_mib(pid));
    drop(ork);
}
