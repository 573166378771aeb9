//! The probes, never behind the token (a kubelet has none): `/startup` once every CRD's
//! task runs, `/health` while the process serves (liveness), `/ready` once started and
//! until shutdown begins, and while no CRD is degraded (readiness). `/healthz` and `/readyz`
//! are the older names.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::Inspect;
use crate::outcome::health::State as Health;

pub(super) fn routes() -> OpenApiRouter<Inspect> {
    OpenApiRouter::new()
        .routes(routes!(startup))
        .routes(routes!(health))
        .routes(routes!(healthz))
        .routes(routes!(ready))
        .routes(routes!(readyz))
}

fn answer(ok: bool, body: Value) -> (StatusCode, Json<Value>) {
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

/// 200 once every CRD's task runs (started, or pending on a dependency or its kind).
#[utoipa::path(get, path = "/startup", tag = "probes", responses((status = 200, description = "started"), (status = 503, description = "starting")))]
async fn startup(State(inspect): State<Inspect>) -> (StatusCode, Json<Value>) {
    let started = inspect.lifecycle.is_started();
    answer(
        started,
        json!({"started": started, "isKonductor": inspect.ownership.is_konductor()}),
    )
}

/// Liveness: 200 while the process serves.
#[utoipa::path(get, path = "/health", tag = "probes", responses((status = 200, description = "alive")))]
async fn health(State(inspect): State<Inspect>) -> (StatusCode, Json<Value>) {
    answer(
        true,
        json!({"alive": true, "stopping": inspect.lifecycle.is_stopping(), "isKonductor": inspect.ownership.is_konductor()}),
    )
}

/// The older name of `/health`.
#[utoipa::path(get, path = "/healthz", tag = "probes", responses((status = 200, description = "alive")))]
async fn healthz(state: State<Inspect>) -> (StatusCode, Json<Value>) {
    health(state).await
}

/// Readiness: 503 while starting, once shutting down, and while a CRD is degraded (named).
#[utoipa::path(get, path = "/ready", tag = "probes", responses((status = 200, description = "ready"), (status = 503, description = "not ready, and why")))]
async fn ready(State(inspect): State<Inspect>) -> (StatusCode, Json<Value>) {
    let lifecycle = &inspect.lifecycle;
    let degraded: Vec<String> = inspect
        .health
        .all()
        .into_iter()
        .filter(|(_, h)| h.state == Health::Degraded)
        .map(|(name, _)| name)
        .collect();
    let why = match (lifecycle.is_started(), lifecycle.is_stopping()) {
        (false, _) => Some("starting".to_string()),
        (_, true) => Some("shutting down".to_string()),
        _ if !degraded.is_empty() => Some(format!("degraded: {}", degraded.join(", "))),
        _ => None,
    };
    answer(
        why.is_none(),
        json!({"ready": why.is_none(), "reason": why, "isKonductor": inspect.ownership.is_konductor(), "ha": inspect.ownership.report()}),
    )
}

/// The older name of `/ready`.
#[utoipa::path(get, path = "/readyz", tag = "probes", responses((status = 200, description = "ready"), (status = 503, description = "not ready")))]
async fn readyz(state: State<Inspect>) -> (StatusCode, Json<Value>) {
    ready(state).await
}
