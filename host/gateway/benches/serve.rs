//! What the gateway costs, against the local control plane: the same change applied 300
//! times through `POST /api/v1/apply` (target mode, a static token) and as the equivalent
//! server-side apply straight to the API server, each sequential on one connection; then the
//! cost of verifying a bearer: an OIDC token (RS256 and ES256, the issuer's keys cached) on
//! its first use and used again, and a static token. Printed: p50/p99 of each and the apply ratio.
//! Needs the local control plane (`ork control-plane install`).
//! Run: `cargo bench -p orkestra-gateway --bench serve`.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks name the objects they create; no tenant input reaches these calls"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_gateway::oidc::Verifiers;
use orkestra_gateway::tokens::Tokens;
use orkestra_katalog::model::TokenSource;
use orkestra_test_support::oidc::TestIssuer;
use serde_json::json;

const APPLIES: usize = 300;
const VERIFIES: usize = 5000;

fn katalog(ns: &str, group: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: serve-bench}}
gateway:
  api:
    enabled: true
    auth:
      tokens:
        - {{name: bench, token: '${{SERVE_BENCH_TOKEN}}'}}
spec:
  crds:
    app:
      apiTypes: {{group: {group}, version: v1, kind: App, plural: apps}}
      namespace: {ns}
      serve:
        enabled: true
        namespace: {ns}
        fields:
          image: {{required: true}}
          replicas: {{}}
      operatorBox: {{}}
"
    )
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort_unstable();
    let at = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    (at(0.50), at(0.99))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(bench());
}

async fn bench() {
    orkestra_test_support::cluster().expect("the local control plane");
    let ns = orkestra_test_support::namespace("serve-bench")
        .await
        .expect("a namespace");
    let group = "bench.gateway.orkestra.io";
    // SAFETY: set before any other thread reads the environment.
    unsafe { std::env::set_var("SERVE_BENCH_TOKEN", "bench-token") };
    let compiled =
        Arc::new(orkestra_katalog::load_sources(&[("k.yaml".into(), katalog(&ns.name, group))]).expect("the Katalog"));
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, Duration::from_secs(60))
        .await
        .expect("the CRD");
    let (router, _refresh) = orkestra_gateway::api::start(ns.client.clone(), compiled, &ns.name)
        .await
        .expect("the Serve API");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let url = format!("http://{}/api/v1/apply", listener.local_addr().expect("an address"));
    tokio::spawn(async move { axum::serve(listener, axum::Router::new().nest("/api/v1", router)).await });

    let http = reqwest::Client::new();
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "App"), "apps");
    let apps: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let params = PatchParams::apply("bench-direct");

    let mut gateway = Vec::with_capacity(APPLIES);
    let mut direct = Vec::with_capacity(APPLIES);
    // Interleaved, so both see the same API server load; the first rounds warm up.
    for i in 0..APPLIES + 20 {
        let started = Instant::now();
        let response = http
            .post(&url)
            .bearer_auth("bench-token")
            .json(&json!({"target": "app", "name": "via-gateway", "image": format!("myorg/web:{i}")}))
            .send()
            .await
            .expect("the gateway answers");
        assert!(response.status().is_success(), "{:?}", response.text().await);
        let through = started.elapsed();
        let object = json!({
            "apiVersion": format!("{group}/v1"), "kind": "App",
            "metadata": {"name": "direct", "namespace": ns.name},
            "spec": {"image": format!("myorg/web:{i}")},
        });
        let started = Instant::now();
        apps.patch("direct", &params, &Patch::Apply(&object))
            .await
            .expect("server-side apply");
        let straight = started.elapsed();
        if i >= 20 {
            gateway.push(through);
            direct.push(straight);
        }
    }
    let (g50, g99) = percentiles(gateway);
    let (d50, d99) = percentiles(direct);

    let es256 = verifications(TestIssuer::start().await).await;
    let rs256 = verifications(TestIssuer::start_rsa(include_bytes!("../testdata/rsa-test-key.der")).await).await;
    let statics = Tokens::with((0..8).map(|i| (format!("t{i}"), format!("{i:064}"))));
    let mut fixed = Vec::with_capacity(VERIFIES);
    for _ in 0..VERIFIES {
        let started = Instant::now();
        std::hint::black_box(statics.identify(&format!("{:064}", 7)));
        fixed.push(started.elapsed());
    }
    let (s50, s99) = percentiles(fixed);

    println!("serve bench: {APPLIES} sequential applies of one changing field, {VERIFIES} verifications");
    println!("{:<44} {:>10} {:>10}", "", "p50", "p99");
    println!("{:<44} {:>10} {:>10}", "apply through the gateway", ms(g50), ms(g99));
    println!(
        "{:<44} {:>10} {:>10}",
        "server-side apply straight to the API server",
        ms(d50),
        ms(d99)
    );
    println!(
        "{:<44} {:>10} {:>10}",
        "gateway overhead",
        ms(g50.saturating_sub(d50)),
        ms(g99.saturating_sub(d99))
    );
    println!(
        "ratio gateway / direct: p50 {:.2}x, p99 {:.2}x",
        g50.as_secs_f64() / d50.as_secs_f64(),
        g99.as_secs_f64() / d99.as_secs_f64()
    );
    for (alg, (first, again)) in [("RS256", rs256), ("ES256", es256)] {
        let (f50, f99) = percentiles(first);
        let (a50, a99) = percentiles(again);
        let label = format!("OIDC {alg} token, first use (keys cached)");
        println!("{label:<44} {:>10} {:>10}", us(f50), us(f99));
        let label = format!("OIDC {alg} token, used again (remembered)");
        println!("{label:<44} {:>10} {:>10}", us(a50), us(a99));
    }
    println!(
        "{:<44} {:>10} {:>10}",
        "static token matched (8 tokens)",
        us(s50),
        us(s99)
    );
}

/// The cost of verifying tokens of `issuer`: new ones (each checked in full, the issuer's
/// keys cached), and one token again and again (a CI job's calls, remembered).
async fn verifications(issuer: TestIssuer) -> (Vec<Duration>, Vec<Duration>) {
    let sources: Vec<TokenSource> = serde_json::from_value(json!([
        {"name": "ci", "oidc": {"issuer": issuer.url(), "audience": "orkestra", "allow": {"repository": "shop/web"}}}
    ]))
    .expect("a token entry");
    let verifiers = Verifiers::new(&sources);
    let now = jiff::Timestamp::now().as_second();
    let token_for = |i: usize| {
        issuer.sign(
            &json!({"iss": issuer.url(), "sub": format!("repo:shop/web:{i}"), "aud": "orkestra",
                            "exp": now + 3600, "repository": "shop/web"}),
        )
    };
    let token = token_for(0);
    verifiers.verify(&token).await.expect("a good token");
    let fresh: Vec<String> = (1..=VERIFIES / 10).map(token_for).collect();
    let mut first = Vec::with_capacity(fresh.len());
    for token in &fresh {
        let started = Instant::now();
        verifiers.verify(token).await.expect("a good token");
        first.push(started.elapsed());
    }
    let mut again = Vec::with_capacity(VERIFIES);
    for _ in 0..VERIFIES {
        let started = Instant::now();
        verifiers.verify(&token).await.expect("a good token");
        again.push(started.elapsed());
    }
    (first, again)
}
