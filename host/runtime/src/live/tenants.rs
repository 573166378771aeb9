//! `/tenants`: what each namespace may take of the runtime (`spec.tenants`, defaults filled
//! in) and what the busiest take now: reconciles running over every CRD, API requests that
//! waited for their namespace's rate, Wasm calls running, and the Wasm engine's instance
//! pool (its size, what each tenant holds of it and its share).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::Shared;
use orkestra_katalog::compile::TenantLimits;

/// Namespaces listed in each of the figures, the busiest first.
pub(super) const TENANTS_SHOWN: usize = 50;

pub(super) fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new().routes(routes!(tenants))
}

fn limits(limits: &TenantLimits) -> Value {
    json!({
        "reconciles": limits.reconciles,
        "api": limits.api.map(|rate| json!({"qps": rate.qps, "burst": rate.burst})),
        "wasmCalls": limits.wasm_calls,
        "wasmCpu": limits.wasm_cpu,
    })
}

/// Each namespace's limits and what the busiest take now.
#[utoipa::path(get, path = "/tenants", tag = "tenants", responses((status = 200, description = "`{limits, namespaces, reconciling, apiWaits, wasmCalls, wasmPool, wasmCpu}`")))]
async fn tenants(State(shared): State<Shared>) -> Json<Value> {
    let tenants = &shared.inspect.tenants;
    let rules = tenants.rules();
    let named: serde_json::Map<String, Value> = rules
        .namespaces
        .iter()
        .map(|(namespace, l)| (namespace.clone(), limits(l)))
        .collect();
    let reconciling: Vec<Value> = tenants
        .reconciling()
        .into_iter()
        .take(TENANTS_SHOWN)
        .map(|(namespace, running)| json!({"namespace": &*namespace, "running": running}))
        .collect();
    let api_waits: Vec<Value> = tenants
        .api_waits()
        .into_iter()
        .take(TENANTS_SHOWN)
        .map(|(namespace, w)| json!({"namespace": namespace, "requests": w.requests, "seconds": w.seconds}))
        .collect();
    let host = shared.inspect.components.host();
    let wasm_calls: Vec<Value> = host
        .as_ref()
        .map(|host| host.tenant_calls())
        .unwrap_or_default()
        .into_iter()
        .take(TENANTS_SHOWN)
        .map(|(namespace, running)| json!({"namespace": namespace, "running": running}))
        .collect();
    let wasm_pool = host.as_ref().map(|host| {
        let mut pool = host.pool();
        pool.tenants.truncate(TENANTS_SHOWN);
        pool
    });
    let wasm_cpu: Vec<Value> = host
        .as_ref()
        .map(|host| host.tenant_cpu())
        .unwrap_or_default()
        .into_iter()
        .take(TENANTS_SHOWN)
        .map(|(tenant, used)| json!({"tenant": tenant, "usedSeconds": used.used, "waitedSeconds": used.waited}))
        .collect();
    Json(json!({
        "limits": limits(&rules.default),
        "namespaces": named,
        "reconciling": reconciling,
        "apiWaits": api_waits,
        "wasmCalls": wasm_calls,
        "wasmPool": wasm_pool,
        "wasmCpu": wasm_cpu,
    }))
}
