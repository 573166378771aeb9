//! Live Katalog reload on a running runtime: a CRD added, changed or removed in the Katalog
//! file applies without a restart, the CRDs not changed keep their workers, queue and
//! caches, and a Katalog that does not load changes nothing and says why.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use orkestra_test_support::eventually;
use serde_json::{Value, json};

use crate::pipeline::WAIT;
use crate::running::Running;

const GROUP: &str = "reload.orkestra.io";

/// A Katalog of CRDs `(name, kind, value)`: each CR gets a ConfigMap `<cr>-out` whose `v`
/// is the value.
fn katalog(crds: &[(&str, &str, &str)]) -> String {
    let mut text =
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {name: reloads}\nspec:\n  crds:\n".to_string();
    for (name, kind, value) in crds {
        text += &format!(
            "    {name}:\n      apiTypes: {{group: {GROUP}, version: v1, kind: {kind}}}\n      operatorBox:\n        reconcile:\n          onReconcile:\n            configMaps:\n              - {{name: '{{{{ .metadata.name }}}}-out', data: {{v: '{value}'}}}}\n"
        );
    }
    text
}

/// Waits until the ConfigMap `name` holds `v: value`.
async fn holds(maps: &Api<ConfigMap>, name: &str, value: &str) {
    eventually(&format!("{name} holding {value:?}"), WAIT, || async {
        let map = maps.get_opt(name).await.ok()??;
        (map.data?.get("v")? == value).then_some(())
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_changed_katalog_applies_crd_by_crd_without_a_restart_and_a_broken_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("katalog.yaml");
    let first = [
        ("alpha", "Alpha", "one"),
        ("beta", "Beta", "one"),
        ("gamma", "Gamma", "one"),
    ];
    std::fs::write(&file, katalog(&first)).unwrap();
    let run = Running::start("reload", std::slice::from_ref(&file), &[]).await;
    let maps: Api<ConfigMap> = run.api();
    for (_, kind, _) in first {
        run.create(
            &run.crs(GROUP, kind),
            kind,
            &format!("{}1", kind.to_lowercase()),
            json!({}),
        )
        .await;
    }
    for (_, kind, value) in first {
        holds(&maps, &format!("{}1-out", kind.to_lowercase()), value).await;
    }
    let alpha = run.inspect.roster.get("alpha").unwrap();

    // beta changed, gamma removed, delta added, alpha as it was.
    let next = [
        ("alpha", "Alpha", "one"),
        ("beta", "Beta", "two"),
        ("delta", "Delta", "new"),
    ];
    std::fs::write(&file, katalog(&next)).unwrap();
    let loaded = orkestra_katalog::load(std::slice::from_ref(&file)).unwrap();
    orkestra_kube::crd_install::install_crds(&run.ns.client, &loaded.katalog, WAIT)
        .await
        .unwrap();
    let reloader =
        orkestra::runtime::reload::Reloader::new(vec![file.clone()], run.components.clone(), run.pipelines.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = orkestra::live::router(run.inspect.clone(), Some(reloader), orkestra::live::Auth::open());
    let endpoint = tokio::spawn(async move { axum::serve(listener, router).await });
    let reload = || async {
        let response = reqwest::Client::new()
            .post(format!("http://{addr}/reload"))
            .send()
            .await
            .unwrap();
        (response.status(), response.json::<Value>().await.unwrap())
    };
    let (status, outcome) = reload().await;
    assert!(status.is_success(), "{status}: {outcome}");
    assert_eq!(outcome["started"], json!(["delta"]), "{outcome}");
    assert_eq!(outcome["restarted"], json!(["beta"]), "{outcome}");
    assert_eq!(outcome["stopped"], json!(["gamma"]), "{outcome}");
    assert_eq!(outcome["errors"], json!([]), "{outcome}");

    // The changed pipeline reaches the CR it already had, with no event on it.
    holds(&maps, "beta1-out", "two").await;
    // The removed CRD is gone from the runtime: no health, no Live API entry, no reconcile.
    assert!(run.inspect.roster.get("gamma").is_none());
    assert!(run.inspect.health.get("gamma").is_none());
    run.create(&run.crs(GROUP, "Gamma"), "Gamma", "gamma2", json!({})).await;
    // The added CRD runs.
    run.create(&run.crs(GROUP, "Delta"), "Delta", "delta1", json!({})).await;
    holds(&maps, "delta1-out", "new").await;
    // The unchanged CRD kept its run: the same cache (listed once) and counters see a new CR.
    run.create(&run.crs(GROUP, "Alpha"), "Alpha", "alpha2", json!({})).await;
    holds(&maps, "alpha2-out", "one").await;
    let now = run.inspect.roster.get("alpha").unwrap();
    assert!(Arc::ptr_eq(&alpha.counters, &now.counters) && Arc::ptr_eq(&alpha.tuning, &now.tuning));
    let key = format!("{}/alpha2", run.ns.name);
    assert!(
        alpha.cache.get(&key).is_some(),
        "the cache alpha started with is still fed"
    );
    assert_eq!(alpha.cache.lists(), 1, "alpha's watch did not list again");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        maps.get_opt("gamma2-out").await.unwrap().is_none(),
        "a removed CRD reconciles nothing"
    );

    // A Katalog that does not load: 422 naming the cause, and the last good one runs on.
    std::fs::write(&file, katalog(&next) + "    broken: [\n").unwrap();
    let (status, outcome) = reload().await;
    assert_eq!(status.as_u16(), 422, "{outcome}");
    let error = outcome["errors"][0].as_str().unwrap();
    assert!(
        error.contains("did not load") && error.contains("last good one keeps running"),
        "{error}"
    );
    assert_eq!(
        run.inspect.roster.running().into_keys().collect::<Vec<_>>(),
        ["alpha", "beta", "delta"]
    );
    run.create(&run.crs(GROUP, "Delta"), "Delta", "delta2", json!({})).await;
    holds(&maps, "delta2-out", "new").await;
    endpoint.abort();
    run.stop().await;
}
