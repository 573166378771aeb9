//! A plain kube-runtime controller doing the converge benchmark's work, as a team would
//! write it by hand, in a program of its own (so its memory is its own, not that of the
//! benchmark's binary): for each Item, a ConfigMap it owns, applied server-side, and a Ready
//! condition on its status. Ten concurrent reconciles, two tokio workers (as the machine
//! has two cores), the system allocator.
//!
//! Usage: `kube-runtime-contender NAMESPACE` (`KUBECONFIG` names the cluster). Runs until
//! stdin closes, then prints its peak resident set as `peak_rss_kib=N`. Its requests carry
//! the User-Agent `bench-kube-runtime`, by which the benchmark counts them.

#![allow(
    clippy::disallowed_methods,
    reason = "a plain controller as a team writes it: the names it uses come from the API server's own watch"
)]

use std::io::BufRead;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::watcher;
use serde_json::json;

const GROUP: &str = "converge.orkestra.io";
const WORKERS: u16 = 10;

fn main() {
    let namespace = std::env::args()
        .nth(1)
        .expect("usage: kube-runtime-contender NAMESPACE");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(async {
        let mut config = kube::Config::infer().await.expect("a kubeconfig");
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static("bench-kube-runtime"),
        ));
        let client = kube::Client::try_from(config).expect("a client");
        let running = tokio::spawn(control(client, namespace));
        tokio::task::spawn_blocking(|| for _ in std::io::stdin().lock().lines().map_while(Result::ok) {})
            .await
            .expect("stdin");
        running.abort();
    });
    println!("peak_rss_kib={}", peak_rss_kib());
}

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Item"), "items")
}

async fn control(client: kube::Client, namespace: String) {
    let crs = Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &resource());
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    Controller::new_with(crs, watcher::Config::default(), resource())
        .owns(configmaps, watcher::Config::default())
        .with_config(Config::default().concurrency(WORKERS))
        .run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_secs(5)),
            Arc::new(client),
        )
        .for_each(|_| async {})
        .await;
}

async fn reconcile(cr: Arc<DynamicObject>, client: Arc<kube::Client>) -> Result<Action, kube::Error> {
    let namespace = cr.metadata.namespace.clone().unwrap_or_default();
    let name = cr.metadata.name.clone().unwrap_or_default();
    let configmap = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": format!("{GROUP}/v1"), "kind": "Item", "name": name,
            "uid": cr.metadata.uid, "controller": true, "blockOwnerDeletion": true,
        }]},
        "data": {"value": cr.data["spec"]["value"]},
    });
    Api::<ConfigMap>::namespaced((*client).clone(), &namespace)
        .patch(&name, &PatchParams::apply("plain").force(), &Patch::Apply(&configmap))
        .await?;
    let generation = cr.metadata.generation;
    let ready = cr.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    if !ready || cr.data["status"]["observedGeneration"] != json!(generation) {
        let status = json!({"status": {"observedGeneration": generation, "conditions": [{
            "type": "Ready", "status": "True", "reason": "ReconcileSucceeded", "message": "",
            "lastTransitionTime": jiff::Timestamp::now().to_string(), "observedGeneration": generation,
        }]}});
        Api::<DynamicObject>::namespaced_with((*client).clone(), &namespace, &resource())
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
    }
    Ok(Action::await_change())
}

/// This process's peak resident set, in KiB (`VmHWM`).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
