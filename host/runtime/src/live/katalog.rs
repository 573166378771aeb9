//! `/katalog...`: the Katalog as written and as run, each CRD's configuration and live
//! figures, and its health state machine.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Inspect, Shared, unknown_crd};
use crate::outcome::health::{Health, State as HealthState};
use crate::pipeline::flows::{FlowBy, FlowView};
use crate::pipeline::roster::CrdHandle;
use orkestra_katalog::DependencyCondition;

pub(super) fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new()
        .routes(routes!(katalog))
        .routes(routes!(raw))
        .routes(routes!(enriched))
        .routes(routes!(crd_info))
        .routes(routes!(crd_health))
        .routes(routes!(crd_raw))
        .routes(routes!(crd_enriched))
}

/// The whole Katalog: its health, counts by state, and a summary of every CRD.
#[utoipa::path(get, path = "/katalog", tag = "katalog", responses((status = 200, description = "the Katalog's summary")))]
async fn katalog(State(shared): State<Shared>) -> Json<Value> {
    let inspect = &shared.inspect;
    let health = inspect.health.all();
    let crds = inspect.crds();
    let shown: Vec<&CrdHandle> = crds.iter().filter(|h| h.crd.endpoints.enabled).collect();
    let mut counts = serde_json::Map::new();
    for state in HealthState::ALL {
        let n = shown
            .iter()
            .filter(|h| health.get(&*h.crd.name).map(|x| x.state) == Some(state))
            .count();
        counts.insert(state.label().into(), json!(n));
    }
    let degraded: Vec<&str> = shown
        .iter()
        .filter(|h| {
            health
                .get(&*h.crd.name)
                .is_some_and(|x| x.state == HealthState::Degraded)
        })
        .map(|h| &*h.crd.name)
        .collect();
    let mut namespaces: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for h in &shown {
        let ns = h.crd.namespace.clone().unwrap_or_else(|| "*".into());
        namespaces.entry(ns).or_default().push(&h.crd.name);
    }
    let katalog = inspect.katalog();
    let model = &katalog.katalog;
    let ready = inspect.lifecycle.is_started() && !inspect.lifecycle.is_stopping() && degraded.is_empty();
    let total_enabled = model.crds.values().filter(|c| c.entry.enabled).count();
    Json(json!({
        "name": model.name,
        "healthy": degraded.is_empty(),
        "orkReady": ready,
        "isKonductor": inspect.ownership.is_konductor(),
        "ha": inspect.ownership.report(),
        "status": if degraded.is_empty() { 200 } else { 503 },
        "degradedReason": (!degraded.is_empty()).then(|| format!("degraded: {}", degraded.join(", "))),
        "total": model.crds.len(),
        "totalEnabled": total_enabled,
        "totalDegraded": degraded.len(),
        "statusCounts": counts,
        "namespaces": namespaces,
        "serveEnabled": model.crds.values().any(|c| c.entry.serve.as_ref().is_some_and(|s| s.enabled)),
        // Where people and tools reach this Katalog's gateway (upstream's key first).
        "gatewayEndpoint": model.security.as_ref().and_then(|s| s.gateway_endpoint.as_deref())
            .or(model.gateway.as_ref().and_then(|g| g.endpoint.as_deref())),
        "crds": shown.iter().map(|h| summary(inspect, h, health.get(&*h.crd.name))).collect::<Vec<_>>(),
        // The runtime's own needs it may not do (Leases, the gateway's, its rollout state).
        "permissions": inspect.permissions.report(crate::outcome::permissions::RUNTIME),
    }))
}

/// Each CRD in short: identity, state, workers, queue, CR count, dependencies.
fn summary(inspect: &Inspect, handle: &CrdHandle, health: Option<&Health>) -> Value {
    let crd = &handle.crd;
    let state = health.map_or(HealthState::Pending, |h| h.state);
    let all = inspect.health.all();
    let depends: Vec<Value> = crd
        .depends_on
        .iter()
        .map(|(name, condition)| {
            let theirs = all.get(name);
            let met = theirs.is_some_and(|h| match condition {
                DependencyCondition::Started => h.is_started(),
                DependencyCondition::Healthy => h.is_healthy(),
            });
            let condition = match condition {
                DependencyCondition::Started => "started",
                DependencyCondition::Healthy => "healthy",
            };
            json!({"name": name, "condition": condition, "met": met, "state": theirs.map(|h| h.state.label())})
        })
        .collect();
    let recent = handle.counters.recent(std::time::Instant::now());
    json!({
        "name": &*crd.name,
        "kind": crd.kind,
        "group": crd.group,
        "version": crd.version,
        "plural": crd.plural,
        "gvk": &*crd.gvk,
        "namespace": crd.namespace,
        "state": state.label(),
        "healthy": health.is_some_and(Health::is_healthy),
        "gated": state == HealthState::Gated,
        "gatedReason": (state == HealthState::Gated).then_some("the reconcile gate held back the last item"),
        "waitingFor": health.and_then(Health::waiting_for),
        "lastError": health.and_then(|h| h.last_error.clone()),
        "workers": {"current": handle.tuning.workers(), "busy": handle.queue.running()},
        "queue": {"depth": handle.queue.depth(), "maxDepth": handle.tuning.max_depth()},
        "crCount": handle.cache.len(),
        "reconciles": {
            "total": health.map_or(0, |h| h.total_reconciles),
            "failed": health.map_or(0, |h| h.failed_reconciles),
        },
        "errorRatePercent": recent.error_rate_percent,
        "reconcileP95Ms": recent.p95_ms,
        "reconcileP99Ms": recent.p99_ms,
        "dependsOn": depends,
        "crossAccess": crd.cross_access,
    })
}

/// The Katalog files as written.
#[utoipa::path(get, path = "/katalog/raw", tag = "katalog", responses((status = 200, description = "each file and its text")))]
async fn raw(State(shared): State<Shared>) -> Json<Value> {
    let files: Vec<Value> = shared
        .inspect
        .katalog()
        .katalog
        .sources
        .iter()
        .map(|(path, text)| json!({"path": path, "text": text}))
        .collect();
    Json(json!({ "files": files }))
}

/// The Katalog as this runtime runs it: merged, migrated, motifs and profiles expanded,
/// every default filled in.
#[utoipa::path(get, path = "/katalog/enriched", tag = "katalog", responses((status = 200, description = "every CRD entry with its defaults")))]
async fn enriched(State(shared): State<Shared>) -> Json<Value> {
    let katalog = shared.inspect.katalog();
    let model = &katalog.katalog;
    let crds: serde_json::Map<String, Value> = model
        .crds
        .iter()
        .filter(|(name, _)| shared.inspect.crd(name).is_some())
        .map(|(name, crd)| (name.clone(), serde_json::to_value(&crd.entry).unwrap_or_default()))
        .collect();
    Json(json!({"name": model.name, "finalizers": model.finalizers, "notes": model.notes, "crds": crds}))
}

/// Flows of a CRD's queue shown on the Live API and `/metrics`: the busiest, then the most
/// recently served.
pub const FLOWS_SHOWN: usize = 20;

fn flows_view(flows: &[FlowView]) -> Value {
    let ms = |wait: Option<std::time::Duration>| wait.map(|w| w.as_secs_f64() * 1e3);
    flows
        .iter()
        .map(|flow| {
            json!({
                "flow": &*flow.flow,
                "queued": {"user": flow.user, "background": flow.background},
                "served": flow.stats.served,
                "waitP50Ms": ms(flow.stats.wait(50)),
                "waitP99Ms": ms(flow.stats.wait(99)),
            })
        })
        .collect()
}

/// A CRD's configuration and live figures (what cross reads of protocol `metrics` and
/// `info` ask for). 404 with `endpoints.info: false`.
#[utoipa::path(get, path = "/katalog/{crd}", tag = "katalog",
    params(("crd" = String, Path, description = "the CRD's key in the Katalog")),
    responses((status = 200, description = "configuration and live figures"), (status = 404, description = "no such CRD, or its info endpoint is off")))]
async fn crd_info(State(shared): State<Shared>, Path(name): Path<String>) -> Response {
    let inspect = &shared.inspect;
    let Some(handle) = inspect.crd(&name).filter(|h| h.crd.endpoints.info) else {
        return unknown_crd(&name);
    };
    let crd = &handle.crd;
    let health = inspect.health.get(&name);
    let mut body = summary(inspect, &handle, health.as_ref());
    let katalog = inspect.katalog();
    let Some(written) = katalog.katalog.crds.get(&name).map(|c| &c.entry) else {
        return unknown_crd(&name);
    };
    let configured = written
        .operator_box
        .reconcile
        .as_ref()
        .is_some_and(|r| r.workers.is_some());
    let source = match (handle.tuning.scaled(), configured) {
        (true, _) => "autoscaler",
        (false, true) => "configured",
        (false, false) => "default",
    };
    body["workers"]["source"] = json!(source);
    body["isKonductor"] = json!(inspect.ownership.is_konductor());
    body["resync"] = json!(orkestra_expr::duration::format_go(
        handle.tuning.resync().borrow().as_secs_f64()
    ));
    body["queue"]["failureThreshold"] = serde_json::to_value(crd.failure_threshold).unwrap_or_default();
    body["queue"]["fairness"] = json!({
        "by": match &crd.flows.by {
            FlowBy::Namespace => "namespace".to_string(),
            FlowBy::Label(key) => format!("label:{key}"),
            FlowBy::None => "none".to_string(),
        },
        "weights": crd.flows.weights,
        "agingMs": crd.flows.aging.as_millis() as u64,
    });
    body["queue"]["flows"] = flows_view(&handle.queue.flows(FLOWS_SHOWN));
    body["enqueue"] = handle.stats.snapshot();
    body["eventLog"] = json!({"events": handle.events.len(), "crs": handle.events.crs()});
    body["writes"] = json!(handle.counters.writes.load(std::sync::atomic::Ordering::Relaxed));
    body["failuresByReason"] = json!(handle.counters.failures_by_reason());
    body["rbac"] = json!(rbac(&katalog, crd));
    body["admission"] = json!({
        "validationRules": written.admission.validation.as_ref().map_or(0, |v| v.rules.len()),
        "mutationRules": written.admission.mutation.as_ref().map_or(0, |m| m.rules.len()),
        "externalCalls": crd.rule_calls.len(),
        "webhooksEnabled": false,
    });
    body["autoscaler"] = match &crd.autoscale {
        Some(rule) => json!({
            "configured": true,
            "active": handle.tuning.scaled(),
            "interval": orkestra_expr::duration::format_go(rule.interval.as_secs_f64()),
            "cooldown": orkestra_expr::duration::format_go(rule.cooldown.as_secs_f64()),
            "workers": rule.workers,
            "queueDepth": rule.queue_depth,
        }),
        None => json!({"configured": false}),
    };
    body["components"] = json!(
        inspect
            .components
            .slots()
            .iter()
            .filter(|s| crate::runtime::slots::belongs(&s.name, &crd.name))
            .map(|s| s.name.to_string())
            .collect::<Vec<_>>()
    );
    body["endpoints"] = json!({"health": crd.endpoints.health, "info": crd.endpoints.info});
    // Cross reads of another runtime read `metrics`; a CRD closed to them shows none.
    if crd.cross_access
        && let Some(peer) = inspect.peers.readable(&name)
    {
        body["metrics"] = inspect.peers.live_metrics(&peer);
    }
    Json(body).into_response()
}

/// The RBAC rules the CRD's runtime needs (what `ork manifests` prints for it), by where
/// they hold.
fn rbac(compiled: &orkestra_katalog::Compiled, crd: &orkestra_katalog::compile::CompiledCrd) -> Vec<Value> {
    use orkestra_katalog::rbac::{Needs, Scope};
    let mut out = Vec::new();
    for (scope, rules) in Needs::of_crd(compiled, crd).rules() {
        let namespace = match scope {
            Scope::Cluster => None,
            Scope::Namespace(ns) => Some(ns),
        };
        for rule in rules {
            out.push(json!({
                "namespace": namespace,
                "apiGroups": [rule.api_group],
                "resources": rule.resources,
                "verbs": rule.verbs,
                "resourceNames": rule.resource_names,
            }));
        }
    }
    out
}

/// A CRD's health: 200 when healthy, 503 otherwise. 404 with `endpoints.health: false`.
#[utoipa::path(get, path = "/katalog/{crd}/health", tag = "katalog",
    params(("crd" = String, Path, description = "the CRD's key in the Katalog")),
    responses((status = 200, description = "healthy"), (status = 503, description = "not healthy: its state says why"), (status = 404, description = "no such CRD, or its health endpoint is off")))]
async fn crd_health(State(shared): State<Shared>, Path(name): Path<String>) -> Response {
    let inspect = &shared.inspect;
    let (Some(handle), Some(health)) = (
        inspect.crd(&name).filter(|h| h.crd.endpoints.health),
        inspect.health.get(&name),
    ) else {
        return unknown_crd(&name);
    };
    let all = inspect.health.all();
    let unhealthy_dependencies = handle
        .crd
        .depends_on
        .iter()
        .any(|(dependency, _)| !all.get(dependency).is_some_and(Health::is_healthy));
    let status = match health.is_healthy() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut body = crate::pipeline::feedback::health(&health);
    let recent = handle.counters.recent(std::time::Instant::now());
    for (key, value) in [
        ("name", json!(name)),
        ("status", json!(status.as_u16())),
        ("isKonductor", json!(inspect.ownership.is_konductor())),
        ("healthy", json!(health.is_healthy())),
        ("started", json!(health.is_started())),
        ("pending", json!(health.state == HealthState::Pending)),
        ("gated", json!(health.state == HealthState::Gated)),
        ("consecutiveFails", json!(health.consecutive_fails)),
        ("totalReconciles", json!(health.total_reconciles)),
        ("failedReconciles", json!(health.failed_reconciles)),
        ("lastError", json!(health.last_error)),
        ("waitingFor", json!(health.waiting_for())),
        ("queueDepth", json!(handle.queue.depth())),
        ("errorRate", json!(recent.error_rate_percent)),
        ("resourceCount", json!(handle.cache.len())),
        // Complete lists of the primary watch: more than one means it relisted.
        ("lists", json!(handle.cache.lists())),
        // The CRs this replica reconciles: its share in shard mode, all or none otherwise.
        (
            "owned",
            json!(inspect.ownership.count_owned(&name, &handle.cache.keys())),
        ),
        ("hasUnhealthyDependencies", json!(unhealthy_dependencies)),
        // What of the CRD's needs the runtime may not do, each with the rule to add.
        ("permissions", inspect.permissions.report(&name)),
    ] {
        body[key] = value;
    }
    (status, Json(body)).into_response()
}

/// A CRD's entry as written in its Katalog file.
#[utoipa::path(get, path = "/katalog/{crd}/raw", tag = "katalog",
    params(("crd" = String, Path, description = "the CRD's key in the Katalog")),
    responses((status = 200, description = "the entry as written"), (status = 404, description = "no such CRD")))]
async fn crd_raw(State(shared): State<Shared>, Path(name): Path<String>) -> Response {
    let katalog = shared.inspect.katalog();
    let model = &katalog.katalog;
    let (Some(_), Some(loaded)) = (shared.inspect.crd(&name), model.crds.get(&name)) else {
        return unknown_crd(&name);
    };
    // The file that declares it, read as written (before any translation).
    let written = model
        .sources
        .iter()
        .filter(|(path, _)| *path == loaded.source)
        .find_map(|(_, text)| orkestra_katalog::yaml::parse(text).ok())
        .and_then(|node| Some(node.get("spec")?.get("crds")?.get(&name)?.to_json()));
    Json(json!({"name": name, "file": loaded.source, "entry": written})).into_response()
}

/// A CRD's entry with every default filled in.
#[utoipa::path(get, path = "/katalog/{crd}/enriched", tag = "katalog",
    params(("crd" = String, Path, description = "the CRD's key in the Katalog")),
    responses((status = 200, description = "the entry as run"), (status = 404, description = "no such CRD")))]
async fn crd_enriched(State(shared): State<Shared>, Path(name): Path<String>) -> Response {
    let katalog = shared.inspect.katalog();
    let model = &katalog.katalog;
    let (Some(_), Some(loaded)) = (shared.inspect.crd(&name), model.crds.get(&name)) else {
        return unknown_crd(&name);
    };
    Json(json!({"name": name, "entry": loaded.entry})).into_response()
}
