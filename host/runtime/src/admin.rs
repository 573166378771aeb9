//! The runtime's admin endpoint: the components, reloads, and the first Live API reads
//! (what another runtime's cross reads ask for), all from the runtime's own caches.
//!
//! - `GET /components`: every component slot (revision, digest, source, last error);
//! - `POST /reload[?component=NAME]`: re-reads the Katalog and reloads every component (or
//!   the one named). 200 when all loaded; 422 with the reasons when one did not (the old
//!   version keeps serving); 404 for an unknown component.
//! - `GET /katalog/{crd}/cr/{ns}/{name}` (or `/cr/{name}` when cluster-scoped): one CR
//!   (`name, namespace, generation, phase, ready, spec, status`);
//! - `GET /katalog/{crd}/health`: the CRD's health, 200 when healthy, else 503;
//! - `GET /katalog/{crd}`: its name and live `metrics`.
//!
//! A CRD with `crossAccess: false` answers 404 on all three, as if it were not there.

use std::net::SocketAddr;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::cross::Peers;
use crate::reload::Reloader;
use orkestra_wasm::Components;

#[derive(Clone)]
struct Admin {
    components: Components,
    reloader: Reloader,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReloadQuery {
    component: Option<String>,
}

/// The router, for [`serve`] and tests.
pub fn router(components: Components, reloader: Reloader, peers: Peers) -> Router {
    Router::new()
        .route("/components", get(list))
        .route("/reload", post(reload))
        .with_state(Admin { components, reloader })
        .merge(live(peers))
}

/// The Live API reads alone (what another runtime's cross reads ask for).
pub fn live(peers: Peers) -> Router {
    Router::new()
        .route("/katalog/{crd}", get(crd_summary))
        .route("/katalog/{crd}/health", get(crd_health))
        .route("/katalog/{crd}/cr/{name}", get(cluster_cr))
        .route("/katalog/{crd}/cr/{namespace}/{name}", get(namespaced_cr))
        .with_state(peers)
}

/// Serves the admin endpoint on `addr` until the process ends.
pub async fn serve(addr: SocketAddr, components: Components, reloader: Reloader, peers: Peers) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "admin endpoint listening");
    axum::serve(listener, router(components, reloader, peers)).await
}

fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({ "error": what }))).into_response()
}

fn unknown_crd(crd: &str) -> Response {
    not_found(format!("no readable CRD {crd:?} in this runtime"))
}

async fn crd_summary(State(peers): State<Peers>, Path(crd): Path<String>) -> Response {
    match peers.readable(&crd) {
        Some(peer) => {
            let source = if peer.tuning.scaled() {
                "autoscaler"
            } else {
                "configured"
            };
            Json(json!({
                "name": crd,
                "workers": {"current": peer.tuning.workers(), "source": source},
                "queue": {"depth": peer.queue.depth(), "maxDepth": peer.tuning.max_depth()},
                "resync": orkestra_katalog::duration::format_go(peer.tuning.resync().borrow().as_secs_f64()),
                "metrics": peers.live_metrics(peer),
            }))
            .into_response()
        }
        None => unknown_crd(&crd),
    }
}

async fn crd_health(State(peers): State<Peers>, Path(crd): Path<String>) -> Response {
    let (Some(_), Some(health)) = (peers.readable(&crd), peers.health().get(&crd)) else {
        return unknown_crd(&crd);
    };
    let mut body = crate::feedback::health(&health);
    body["name"] = json!(crd);
    body["started"] = json!(health.is_started());
    body["pending"] = json!(health.state == crate::health::State::Pending);
    body["totalReconciles"] = json!(health.total_reconciles);
    body["failedReconciles"] = json!(health.failed_reconciles);
    body["waitingFor"] = json!(health.waiting_for());
    let status = match health.is_healthy() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, Json(body)).into_response()
}

async fn cluster_cr(State(peers): State<Peers>, Path((crd, name)): Path<(String, String)>) -> Response {
    one_cr(&peers, &crd, name)
}

async fn namespaced_cr(
    State(peers): State<Peers>,
    Path((crd, namespace, name)): Path<(String, String, String)>,
) -> Response {
    one_cr(&peers, &crd, format!("{namespace}/{name}"))
}

/// One CR from the informer cache, by key.
fn one_cr(peers: &Peers, crd: &str, key: String) -> Response {
    let Some(peer) = peers.readable(crd) else {
        return unknown_crd(crd);
    };
    let Some(cr) = peer.cache.get(&key) else {
        return not_found(format!("no {crd} {key}"));
    };
    let ready = cr["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"] == "True");
    Json(json!({
        "name": cr["metadata"]["name"],
        "namespace": cr["metadata"]["namespace"],
        "generation": cr["metadata"]["generation"],
        "phase": cr["status"]["phase"],
        "ready": ready,
        "spec": cr["spec"],
        "status": cr["status"],
    }))
    .into_response()
}

async fn list(State(admin): State<Admin>) -> Json<serde_json::Value> {
    Json(json!({ "components": admin.components.statuses() }))
}

async fn reload(
    State(admin): State<Admin>,
    query: Result<Query<ReloadQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(query) => query,
        Err(rejection) => {
            let error = format!("bad query: {rejection}; the only parameter is component=NAME");
            return (StatusCode::BAD_REQUEST, Json(json!({ "error": error }))).into_response();
        }
    };
    if let Some(name) = &query.component
        && admin.components.get(name).is_none()
    {
        let known: Vec<String> = admin.components.slots().iter().map(|s| s.name.to_string()).collect();
        let error = format!("no component named {name:?}; known: {}", known.join(", "));
        return (StatusCode::NOT_FOUND, Json(json!({ "error": error }))).into_response();
    }
    let outcome = admin.reloader.reload(true, query.component.as_deref()).await;
    let status = if outcome.errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    let body = json!({
        "reloaded": outcome.reloaded,
        "errors": outcome.errors,
        "restartNeeded": outcome.restart_needed,
        "components": admin.components.statuses(),
    });
    (status, Json(body)).into_response()
}
