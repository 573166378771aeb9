//! OpenTelemetry traces, as an operator of the runtime turns them on: `ork run` with the
//! standard `OTEL_*` variables pointing at an OTLP receiver (a stand-in collector on loopback
//! that keeps what it is sent), an intent applied through the Serve API inside a caller's
//! trace, and one trace from the caller to the CR's Ready: the gateway's apply, the
//! runtime's reconcile of that CR with its stages and its component call.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

use crate::pipeline::WAIT;
use orkestra_test_support::{eventually, guests, namespace};

/// An OTLP/HTTP receiver for JSON (`/v1/traces`): every span it was sent.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Value>>>,
    services: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .route("/v1/traces", post(receive))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn spans(&self) -> Vec<Value> {
        self.spans.lock().unwrap().clone()
    }
}

async fn receive(State(receiver): State<Receiver>, Json(body): Json<Value>) -> Json<Value> {
    for resource in body["resourceSpans"].as_array().into_iter().flatten() {
        for attribute in resource["resource"]["attributes"].as_array().into_iter().flatten() {
            if attribute["key"] == "service.name" {
                let name = attribute["value"]["stringValue"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                receiver.services.lock().unwrap().push(name);
            }
        }
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            let spans = scope["spans"].as_array().cloned().unwrap_or_default();
            receiver.spans.lock().unwrap().extend(spans);
        }
    }
    Json(json!({}))
}

/// The value of a span's attribute, as text.
fn attribute(span: &Value, key: &str) -> Option<String> {
    let found = span["attributes"].as_array()?.iter().find(|a| a["key"] == key)?;
    let value = &found["value"];
    value["stringValue"]
        .as_str()
        .map(String::from)
        .or_else(|| value["intValue"].as_str().map(String::from))
        .or_else(|| value["intValue"].as_i64().map(|n| n.to_string()))
}

#[tokio::test]
async fn one_trace_runs_from_a_callers_intent_through_the_gateway_to_the_reconcile_that_makes_the_cr_ready() {
    let ns = namespace("traces").await.unwrap();
    let receiver = Receiver::default();
    let collector = receiver.start().await;
    let hook = guests::component("rust-hook").unwrap();
    let group = format!("{}.traces.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {ns}}}
gateway:
  api:
    enabled: true
    auth:
      tokens:
        - {{name: ci, token: '${{ORK_TRACE_TOKEN}}'}}
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site}}
      serve:
        enabled: true
        namespace: {ns}
        fields:
          title: {{required: true}}
        tokens:
          ci: {{permissions: {{global: ['*']}}}}
      operatorBox:
        reconcile:
          hooks:
            component: {hook}
            capabilities:
              - {{apiVersion: v1, kinds: [ConfigMap], verbs: [get, apply]}}
",
        ns = ns.name,
        hook = hook.display()
    );
    let (_dir, file) = crate::running::katalog_file(&ns, &katalog).await;
    let (_ork, addr) = crate::running::ork_run(
        &file,
        &ns,
        &[],
        &[
            ("ORK_API_TOKEN", ""),
            ("ORK_TRACE_TOKEN", "trace-token"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_SERVICE_NAME", "ork-under-test"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );

    // The caller's own trace: its span is the parent of the gateway's apply.
    let (trace, caller_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let applied = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/apply"))
        .bearer_auth("trace-token")
        .header("traceparent", format!("00-{trace}-{caller_span}-01"))
        .json(&json!({"target": "site", "name": "blog", "title": "Traced"}))
        .send()
        .await
        .unwrap();
    assert_eq!(applied.status(), 200, "{}", applied.text().await.unwrap());

    let in_trace = eventually("the reconcile's spans in the caller's trace", WAIT, || async {
        let spans: Vec<Value> = receiver.spans().into_iter().filter(|s| s["traceId"] == trace).collect();
        let named = |name: &str| spans.iter().any(|s| s["name"] == name);
        (named("serve.apply") && named("reconcile") && named("status") && named("component")).then_some(spans)
    })
    .await
    .unwrap();
    let span = |name: &str| in_trace.iter().find(|s| s["name"] == name).unwrap().clone();
    let apply = span("serve.apply");
    assert_eq!(apply["parentSpanId"], caller_span, "the caller's span is the parent");
    let reconcile = in_trace
        .iter()
        .find(|s| s["name"] == "reconcile" && s["parentSpanId"] == apply["spanId"])
        .unwrap_or_else(|| panic!("the reconcile is a child of the apply: {in_trace:#?}"));
    let key = format!("{}/blog", ns.name);
    assert_eq!(attribute(reconcile, "crd").as_deref(), Some("site"));
    assert_eq!(attribute(reconcile, "key").as_deref(), Some(key.as_str()));
    assert_eq!(attribute(reconcile, "tenant").as_deref(), Some(ns.name.as_str()));
    // Its stages hang under it: the declarative run, its templates, the component call
    // (with the serving revision), the status write.
    let ids: Vec<&Value> = in_trace.iter().map(|s| &s["spanId"]).collect();
    for stage in [
        "declarative.reconcile",
        "templates",
        "component",
        "component.call",
        "status",
    ] {
        let found = span(stage);
        assert!(
            ids.contains(&&found["parentSpanId"]),
            "{stage} has its parent in the trace"
        );
    }
    let declarative = span("declarative.reconcile");
    assert_eq!(declarative["parentSpanId"], reconcile["spanId"]);
    let component = span("component");
    assert_eq!(attribute(&component, "slot").as_deref(), Some("site"));
    assert_eq!(attribute(&component, "revision").as_deref(), Some("1"));
    assert!(receiver.services.lock().unwrap().iter().any(|s| s == "ork-under-test"));

    // The CR the trace ends in is Ready.
    let ready = orkestra_test_support::kubectl(&[
        "get",
        &format!("sites.{group}"),
        "-n",
        &ns.name,
        "blog",
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
    ])
    .unwrap();
    assert_eq!(ready, "True");
}

#[test]
fn a_protocol_or_endpoint_this_ork_cannot_export_to_is_refused_at_start_by_its_variable() {
    let katalog = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs/website/katalog.yaml");
    let validate = |env: &[(&str, &str)]| {
        let output = crate::ork::run(&["validate", "-f", katalog.to_str().unwrap()], env);
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
    let (code, said) = validate(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
    assert_eq!(code, Some(1));
    assert!(
        said.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: this ork exports over HTTP only"),
        "{said}"
    );
    let (code, said) = validate(&[endpoint, ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift")]);
    assert_eq!(code, Some(1));
    assert!(
        said.contains("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=thrift: expected http/protobuf or http/json"),
        "{said}"
    );
    let (code, said) = validate(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318")]);
    assert_eq!(code, Some(1));
    assert!(said.contains("this ork exports over plain http"), "{said}");
    // Switched off, the same variables do nothing.
    let (code, said) = validate(&[
        endpoint,
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_SDK_DISABLED", "true"),
    ]);
    assert_eq!(code, Some(0), "{said}");
}
