//! The Live API of a real runtime on the real API server: every endpoint, its 404s, the
//! per-CRD switches, the token, and `/metrics` parsed back and checked against the
//! reconciles that ran.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use orkestra_test_support::eventually;
use serde_json::{Value, json};

use crate::pipeline::{Harness, WAIT, crd};

const APP: &str = "        reconcile:
          resync: 1s
          workers: 3
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-config', data: {x: '{{ .spec.x }}'}}
";
/// A child the API server refuses (its name is not a DNS name): every reconcile fails.
const BROKEN: &str = "        reconcile:
          queue: {failureThreshold: 1}
          onReconcile:
            configMaps:
              - {name: Not_A_Name, data: {x: '1'}}
";

/// The Live API of `h` on a loopback port.
pub(crate) async fn serve(h: &Harness, auth: orkestra::live::Auth) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = orkestra::live::router(h.inspect.clone(), None, auth);
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

pub(crate) async fn get(url: &str) -> (u16, Value) {
    let response = reqwest::get(url).await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn katalog() -> String {
    [
        crd("app", "App", APP),
        crd("hidden", "Hidden", "        reconcile: {resync: 1s}\n") + "      crossAccess: false\n",
        crd("quiet", "Quiet", "        reconcile: {resync: 1s}\n") + "      endpoints: {health: false, info: false}\n",
        crd("broken", "Broken", BROKEN),
    ]
    .concat()
}

#[tokio::test]
async fn every_endpoint_answers_from_the_runtime_and_hides_what_the_katalog_closes() {
    let h = Harness::start("live", &katalog(), &[], true).await;
    let ns = h.ns.name.clone();
    for name in ["a", "b"] {
        h.create("App", name, json!({"x": name})).await;
    }
    h.create("Hidden", "h", json!({})).await;
    h.create("Broken", "x", json!({"x": "not a list"})).await;
    let url = serve(&h, orkestra::live::Auth::open()).await;
    eventually("the CRs reconciled and broken degraded", WAIT, || async {
        let (_, katalog) = get(&format!("{url}/katalog")).await;
        let counts = &katalog["statusCounts"];
        (counts["degraded"] == 1 && counts["healthy"].as_u64() >= Some(1)).then_some(())
    })
    .await
    .unwrap();

    // Probes: up, alive, not ready while a CRD is degraded (and they say which).
    assert_eq!(get(&format!("{url}/startup")).await.0, 200);
    for probe in ["health", "healthz"] {
        assert_eq!(get(&format!("{url}/{probe}")).await.0, 200, "{probe}");
    }
    for probe in ["ready", "readyz"] {
        let (status, body) = get(&format!("{url}/{probe}")).await;
        assert_eq!(
            (status, body["reason"].clone()),
            (503, json!("degraded: broken")),
            "{probe}"
        );
    }

    // The Katalog: summary, as written, as run.
    let (_, katalog) = get(&format!("{url}/katalog")).await;
    let names: Vec<&str> = katalog["crds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app", "broken", "hidden", "quiet"]);
    assert_eq!(
        (katalog["healthy"].clone(), katalog["status"].clone()),
        (json!(false), json!(503))
    );
    assert_eq!(katalog["isKonductor"], true);
    let (_, raw) = get(&format!("{url}/katalog/raw")).await;
    assert!(raw["files"][0]["text"].as_str().unwrap().contains("crossAccess: false"));
    let (_, enriched) = get(&format!("{url}/katalog/enriched")).await;
    assert_eq!(enriched["crds"]["app"]["operatorBox"]["reconcile"]["workers"], 3);
    assert_eq!(enriched["crds"]["app"]["crossAccess"], true, "defaults filled in");

    // One CRD: configuration and live figures.
    let (status, app) = get(&format!("{url}/katalog/app")).await;
    assert_eq!(status, 200, "{app}");
    assert_eq!(
        (app["workers"]["current"].clone(), app["workers"]["source"].clone()),
        (json!(3), json!("configured"))
    );
    assert_eq!(app["crCount"], 2);
    assert!(
        app["rbac"].as_array().unwrap().iter().any(|r| r["resources"]
            .as_array()
            .unwrap()
            .contains(&json!("configmaps"))
            && r["verbs"].as_array().unwrap().contains(&json!("patch"))),
        "{app}"
    );
    assert_eq!(
        app["metrics"]["workers"], 3,
        "what a cross read of protocol metrics gets"
    );
    let (_, raw) = get(&format!("{url}/katalog/app/raw")).await;
    assert_eq!(raw["entry"]["operatorBox"]["reconcile"]["workers"], 3);
    assert!(raw["entry"].get("crossAccess").is_none(), "as written: no defaults");
    let (_, enriched) = get(&format!("{url}/katalog/app/enriched")).await;
    assert_eq!(enriched["entry"]["crossAccess"], true);

    // Health: 200 healthy, 503 degraded with the error kept.
    let (status, health) = get(&format!("{url}/katalog/app/health")).await;
    assert_eq!((status, health["state"].clone()), (200, json!("healthy")), "{health}");
    let (status, health) = get(&format!("{url}/katalog/broken/health")).await;
    assert_eq!((status, health["state"].clone()), (503, json!("degraded")), "{health}");
    assert!(
        health["lastError"].as_str().unwrap().contains("ApplyFailed"),
        "{health}"
    );

    // Custom resources: the list, one with its children, its events.
    let (_, list) = get(&format!("{url}/katalog/app/cr")).await;
    assert_eq!(list["total"], 2);
    assert_eq!(list["items"][0]["name"], "a");
    assert_eq!(list["items"][0]["ready"], true);
    let (_, page) = get(&format!("{url}/katalog/app/cr?limit=1&offset=1")).await;
    assert_eq!(
        (page["total"].clone(), page["items"][0]["name"].clone()),
        (json!(2), json!("b"))
    );
    let (status, bad) = get(&format!("{url}/katalog/app/cr?limit=lots")).await;
    assert_eq!(status, 400, "{bad}");
    let one = eventually("a's child seen", WAIT, || async {
        let (_, one) = get(&format!("{url}/katalog/app/cr/{ns}/a")).await;
        (one["children"]["ConfigMap"][0]["ready"] == true).then_some(one)
    })
    .await
    .unwrap();
    assert_eq!(one["children"]["ConfigMap"][0]["name"], "a-config");
    assert_eq!(one["spec"]["x"], "a");
    assert_eq!(one["eventsEndpoint"], format!("/katalog/app/cr/{ns}/a/events"));
    let reconciled = eventually("a's events", WAIT, || async {
        let (_, events) = get(&format!("{url}/katalog/app/cr/{ns}/a/events")).await;
        events["events"]
            .as_array()?
            .iter()
            .find(|e| e["reason"] == "AppReconciled")
            .cloned()
    })
    .await
    .unwrap();
    // The event as published, with its note and age.
    let note = reconciled["message"].as_str().unwrap_or_default();
    assert!(note.starts_with(&format!("App {ns}/a reconciled")), "{reconciled}");
    assert!(reconciled["age"].is_string(), "{reconciled}");

    // What the Katalog closes answers 404, as if it were not there.
    for path in [
        "/katalog/nope".to_string(),
        "/katalog/nope/health".into(),
        format!("/katalog/app/cr/{ns}/nope"),
        format!("/katalog/app/cr/{ns}/nope/events"),
        "/katalog/hidden/cr".into(),
        format!("/katalog/hidden/cr/{ns}/h"),
        "/katalog/quiet".into(),
        "/katalog/quiet/health".into(),
        "/no/such/endpoint".into(),
    ] {
        assert_eq!(get(&format!("{url}{path}")).await.0, 404, "{path}");
    }
    let (status, hidden) = get(&format!("{url}/katalog/hidden")).await;
    assert_eq!(status, 200, "its configuration shows");
    assert!(hidden.get("metrics").is_none(), "its metrics do not: {hidden}");

    // The OpenAPI document lists every endpoint, and each answers (no route is missing).
    let (_, openapi) = get(&format!("{url}/openapi.json")).await;
    let paths = openapi["paths"].as_object().unwrap();
    assert!(paths.len() >= 20, "{:?}", paths.keys());
    for (path, item) in paths {
        let concrete = path
            .replace("{crd}", "app")
            .replace("{namespace}", &ns)
            .replace("{name}", "a");
        let method = if item.get("post").is_some() {
            reqwest::Method::POST
        } else {
            reqwest::Method::GET
        };
        let response = reqwest::Client::new()
            .request(method, format!("{url}{concrete}"))
            .send()
            .await
            .unwrap();
        let body = response.text().await.unwrap();
        assert!(
            !body.contains("no such endpoint"),
            "{path} is documented but not served"
        );
    }
    h.stop().await;
}

/// The samples of one metric, by their labels.
fn samples(text: &str, name: &str) -> Vec<(HashMap<String, String>, f64)> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("the exposition parses");
    scrape
        .samples
        .into_iter()
        .filter(|s| s.metric == name)
        .map(|s| {
            let value = match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                prometheus_parse::Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
                prometheus_parse::Value::Summary(_) => f64::NAN,
            };
            (s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(), value)
        })
        .collect()
}

fn one(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = samples(text, name)
        .into_iter()
        .filter(|(have, _)| labels.iter().all(|(k, v)| have.get(*k).map(String::as_str) == Some(*v)))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}\n{text}");
    found[0]
}

#[tokio::test]
async fn metrics_parse_back_and_count_the_reconciles_that_ran() {
    let h = Harness::start("metrics", &katalog(), &[], true).await;
    for name in ["a", "b", "c"] {
        h.create("App", name, json!({"x": name})).await;
    }
    h.create("Broken", "x", json!({"x": "not a list"})).await;
    let url = serve(&h, orkestra::live::Auth::open()).await;
    h.wait_state("broken", orkestra::outcome::health::State::Degraded).await;
    let counters = &h.handle("app").counters;
    // Settled: the figures read now describe what ran.
    eventually("three reconciles of app", WAIT, || async {
        (counters.results.success.load(Ordering::Relaxed) >= 3).then_some(())
    })
    .await
    .unwrap();
    // Resyncs go on: scrape until a scrape falls between two reconciles; then the figures
    // must be the counters' exactly.
    let text = eventually("a scrape between reconciles", WAIT, || async {
        let idle = || h.handle("app").queue.running() == 0;
        let (was_idle, before) = (idle(), counters.reconciles.load(Ordering::Relaxed));
        let response = reqwest::get(format!("{url}/metrics")).await.ok()?;
        let content_type = response.headers()["content-type"].to_str().ok()?.to_string();
        assert!(
            content_type.starts_with("application/openmetrics-text"),
            "{content_type}"
        );
        let text = response.text().await.ok()?;
        (was_idle && idle() && before == counters.reconciles.load(Ordering::Relaxed)).then_some(text)
    })
    .await
    .unwrap();
    let successes = counters.results.success.load(Ordering::Relaxed) as f64;
    let reconciles = counters.reconciles.load(Ordering::Relaxed) as f64;
    assert_eq!(
        one(
            &text,
            "controller_runtime_reconcile_total",
            &[("controller", "app"), ("result", "success")]
        ),
        successes
    );
    assert_eq!(
        one(
            &text,
            "controller_runtime_reconcile_errors_total",
            &[("controller", "app")]
        ),
        0.0
    );
    assert!(
        one(
            &text,
            "controller_runtime_reconcile_errors_total",
            &[("controller", "broken")]
        ) >= 1.0
    );
    assert!(
        one(
            &text,
            "orkestra_reconcile_failures_total",
            &[("controller", "broken"), ("reason", "ApplyFailed")]
        ) >= 1.0
    );
    assert_eq!(
        one(
            &text,
            "controller_runtime_reconcile_time_seconds_count",
            &[("controller", "app")]
        ),
        reconciles
    );
    assert_eq!(
        one(&text, "controller_reconcile_duration_seconds_count", &[("crd", "app")]),
        reconciles
    );
    assert_eq!(
        one(
            &text,
            "controller_runtime_max_concurrent_reconciles",
            &[("controller", "app")]
        ),
        3.0
    );
    assert!(one(&text, "workqueue_adds_total", &[("name", "app")]) >= 3.0);
    assert!(one(&text, "workqueue_retries_total", &[("name", "broken")]) >= 1.0);
    assert!(one(&text, "workqueue_work_duration_seconds_count", &[("name", "app")]) >= 3.0);
    assert_eq!(one(&text, "controller_resource_count", &[("crd", "app")]), 3.0);
    assert_eq!(
        one(
            &text,
            "orkestra_crd_health",
            &[("controller", "broken"), ("state", "degraded")]
        ),
        1.0
    );
    assert_eq!(
        one(
            &text,
            "orkestra_crd_health",
            &[("controller", "broken"), ("state", "healthy")]
        ),
        0.0
    );
    // Label values are the Katalog's names and fixed sets only.
    for (labels, _) in samples(&text, "orkestra_reconcile_failures_total") {
        assert!(["app", "broken", "hidden", "quiet"].contains(&labels["controller"].as_str()));
    }
    h.stop().await;
}

#[tokio::test]
async fn a_token_guards_everything_but_the_probes() {
    let h = Harness::start("live-auth", &crd("app", "App", APP), &[], true).await;
    let url = serve(&h, orkestra::live::Auth::token("s3cret")).await;
    let client = reqwest::Client::new();
    for path in ["/katalog", "/katalog/app", "/metrics", "/components", "/openapi.json"] {
        let refused = client.get(format!("{url}{path}")).send().await.unwrap();
        assert_eq!(refused.status(), 401, "{path}");
        assert_eq!(refused.headers()["www-authenticate"], "Bearer");
        let wrong = client
            .get(format!("{url}{path}"))
            .bearer_auth("guess")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401, "{path}");
        let admitted = client
            .get(format!("{url}{path}"))
            .bearer_auth("s3cret")
            .send()
            .await
            .unwrap();
        assert_eq!(admitted.status(), 200, "{path}");
    }
    eventually("started", WAIT, || async {
        (get(&format!("{url}/startup")).await.0 == 200).then_some(())
    })
    .await
    .unwrap();
    for probe in ["/health", "/healthz", "/ready", "/readyz"] {
        assert_eq!(get(&format!("{url}{probe}")).await.0, 200, "{probe} needs no token");
    }
    h.stop().await;
}

/// `ork generate dashboards`: every metric a panel of the Grafana dashboard queries is one a
/// running runtime's `/metrics` describes.
#[tokio::test]
async fn every_metric_the_generated_dashboard_queries_is_exposed() {
    let h = Harness::start("dash", &crd("app", "App", APP), &[], true).await;
    let url = serve(&h, orkestra::live::Auth::open()).await;
    let metrics = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let output = crate::ork::run(&["generate", "dashboards"], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let dashboard: Value = serde_json::from_slice(&output.stdout).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 10, "{dashboard}");
    let mut queried = 0;
    for panel in panels {
        let expr = panel["targets"][0]["expr"].as_str().unwrap();
        let names = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|t| {
                ["controller_runtime_", "workqueue_", "orkestra_"]
                    .iter()
                    .any(|p| t.starts_with(p))
            });
        for name in names {
            let family = name.trim_end_matches("_bucket").trim_end_matches("_total");
            assert!(
                metrics.contains(&format!("# TYPE {family} ")),
                "{name} (panel {:?}) is not on /metrics",
                panel["title"]
            );
            queried += 1;
        }
    }
    assert!(queried >= panels.len(), "every panel queries a metric");
    h.stop().await;
}

/// Issue 51, item 3: the two latencies of a change on `/metrics`, a user's change and
/// background work apart, and a change no reconcile could handle never counted as done.
#[tokio::test]
async fn metrics_time_each_change_from_its_watch_event_to_its_start_and_to_its_end() {
    let h = Harness::start("latency", &katalog(), &[], true).await;
    h.create("App", "a", json!({"x": "1"})).await;
    h.create("Broken", "x", json!({"x": "1"})).await;
    let url = serve(&h, orkestra::live::Auth::open()).await;
    let observed = |generation: i64| {
        let api = h.api("App");
        async move {
            let cr = api.get("a").await.ok()?;
            (cr.data["status"]["observedGeneration"] == generation).then_some(())
        }
    };
    eventually("a reconciled", WAIT, || observed(1)).await.unwrap();
    h.patch("App", "a", json!({"spec": {"x": "2"}})).await;
    eventually("a's change reconciled", WAIT, || observed(2)).await.unwrap();
    h.wait_state("broken", orkestra::outcome::health::State::Degraded).await;
    // app resyncs every second: background work.
    let text = eventually("a resync timed", WAIT, || async {
        let text = reqwest::get(format!("{url}/metrics")).await.ok()?.text().await.ok()?;
        let background = [("controller", "app"), ("class", "background")];
        (one(&text, "orkestra_reconcile_latency_seconds", &background) >= 1.0).then_some(text)
    })
    .await
    .unwrap();
    let user = |crd| [("controller", crd), ("class", "user")];
    // The creation and the spec change, each from its event.
    assert!(
        one(&text, "orkestra_queue_latency_seconds", &user("app")) >= 2.0,
        "{text}"
    );
    assert!(
        one(&text, "orkestra_reconcile_latency_seconds", &user("app")) >= 2.0,
        "{text}"
    );
    // broken's change waited and started, and no run ever handled it.
    assert!(
        one(&text, "orkestra_queue_latency_seconds", &user("broken")) >= 1.0,
        "{text}"
    );
    assert_eq!(
        one(&text, "orkestra_reconcile_latency_seconds", &user("broken")),
        0.0,
        "{text}"
    );
    h.stop().await;
}

#[tokio::test]
async fn the_katalog_summary_advertises_where_its_gateway_is() {
    let sections = "security: {gatewayEndpoint: 'https://gateway.example.com'}\ngateway: {endpoint: 'https://other.example.com'}\n";
    let h = Harness::start_with(
        "gateway-endpoint",
        sections,
        &crd("app", "App", "        reconcile: {resync: 1s}\n"),
        &[],
        true,
    )
    .await;
    let url = serve(&h, orkestra::live::Auth::open()).await;
    let (status, katalog) = get(&format!("{url}/katalog")).await;
    assert_eq!(status, 200, "{katalog}");
    assert_eq!(
        katalog["gatewayEndpoint"], "https://gateway.example.com",
        "upstream's key first"
    );
    h.stop().await;
}
