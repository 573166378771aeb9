//! A CRD (workers, queue and its flows, admission, RBAC, dependencies, autoscaler, its charts), its CR
//! list, and one CR (spec, status, conditions, children by kind with readiness, events):
//! each asked of the runtime when shown.

use maud::{Markup, html};

use super::draw::charts;
use super::layout::{BASE, badge, figure, json_block, notice, pairs, text};
use crate::runtimes::{FetchError, Runtimes, Watched};

fn unavailable(error: &FetchError) -> Markup {
    notice(&error.to_string())
}

/// Path segment escaping for names put into links (a CR name is a DNS name, but a
/// runtime's answer is not trusted).
fn segment(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c.to_string(),
            other => format!("%{:02X}", other as u32),
        })
        .collect()
}

/// The queue's flows: how it groups CRs, and the busiest flows with their waits.
fn flows(queue: &serde_json::Value) -> Markup {
    let ms = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |ms| format!("{ms:.0} ms"));
    html! {
        h2 { "Flows" }
        p.muted.fairness {
            "by " (text(&queue["fairness"]["by"])) ", background work ages after "
            (queue["fairness"]["agingMs"].as_u64().map_or("-".into(), |ms| format!("{} s", ms / 1000)))
        }
        @let flows = queue["flows"].as_array().cloned().unwrap_or_default();
        @if flows.is_empty() { p.muted { "nothing queued or served yet" } } @else {
            table.flows {
                tr { th { "flow" } th { "queued: user / background" } th { "served" } th { "wait p50" } th { "p99" } }
                @for flow in &flows {
                    tr { td { @match flow["flow"].as_str() { Some("") | None => span.muted { "(none)" }, Some(name) => (name) } }
                         td { (text(&flow["queued"]["user"])) " / " (text(&flow["queued"]["background"])) }
                         td { (text(&flow["served"])) } td { (ms(&flow["waitP50Ms"])) } td { (ms(&flow["waitP99Ms"])) } }
                }
            }
        }
    }
}

pub async fn crd(runtimes: &Runtimes, runtime: &Watched, crd: &str) -> Markup {
    let info = match runtimes.fetch(runtime, &format!("/katalog/{}", segment(crd))).await {
        Ok(info) => info,
        Err(error) => return html! { h1 { (crd) } (unavailable(&error)) },
    };
    let health = runtimes
        .fetch(runtime, &format!("/katalog/{}/health", segment(crd)))
        .await
        .ok();
    let base = format!("{BASE}/r/{}/crd/{}", runtime.config.name, segment(crd));
    let state = info["state"].as_str().unwrap_or("pending");
    html! {
        h1 { (crd) " " (badge(state)) }
        div.muted { (text(&info["gvk"])) @if let Some(ns) = info["namespace"].as_str() { " in namespace " (ns) } }
        div.figures {
            (figure("custom resources", text(&info["crCount"])))
            (figure("workers", format!("{} busy of {} ({})", text(&info["workers"]["busy"]), text(&info["workers"]["current"]), text(&info["workers"]["source"]))))
            (figure("queue", format!("{} of {}", text(&info["queue"]["depth"]), if info["queue"]["maxDepth"] == 0 { "unbounded".into() } else { text(&info["queue"]["maxDepth"]) })))
            (figure("resync", text(&info["resync"])))
            (figure("reconciles", text(&info["reconciles"]["total"])))
            (figure("failed", text(&info["reconciles"]["failed"])))
            (figure("writes", text(&info["writes"])))
        }
        p { a href={(base) "/cr"} { "Custom resources →" } }
        @if let Some(error) = info["lastError"].as_str() { p.error { "last error: " (error) } }
        @if let Some(why) = info["gatedReason"].as_str() { p.why { "gated: " (why) } }
        div.two {
            div {
                h2 { "Health" }
                @match &health {
                    Some(h) => table {
                        tr { th { "state" } td { (badge(h["state"].as_str().unwrap_or("-"))) } }
                        tr { th { "consecutive failures" } td { (text(&h["consecutiveFails"])) } }
                        tr { th { "failure threshold" } td { (text(&info["queue"]["failureThreshold"])) } }
                        tr { th { "unhealthy dependencies" } td { (text(&h["hasUnhealthyDependencies"])) } }
                        tr { th { "waiting for" } td { (text(&h["waitingFor"])) } }
                    },
                    None => p.muted { "health endpoint off" },
                }
                h2 { "Dependencies" }
                @let depends = info["dependsOn"].as_array().cloned().unwrap_or_default();
                @if depends.is_empty() { p.muted { "none" } } @else {
                    table {
                        tr { th { "CRD" } th { "condition" } th { "met" } }
                        @for d in &depends {
                            tr { td { a href={(BASE) "/r/" (runtime.config.name) "/crd/" (segment(d["name"].as_str().unwrap_or_default()))} { (text(&d["name"])) } }
                                 td { (text(&d["condition"])) } td { (badge(&text(&d["met"]))) } }
                        }
                    }
                }
                h2 { "Admission" }
                table {
                    tr { th { "validation rules" } td { (text(&info["admission"]["validationRules"])) } }
                    tr { th { "mutation rules" } td { (text(&info["admission"]["mutationRules"])) } }
                    tr { th { "external calls" } td { (text(&info["admission"]["externalCalls"])) } }
                    tr { th { "offered / queued / coalesced" } td { (text(&info["enqueue"]["offered"])) " / " (text(&info["enqueue"]["queued"])) " / " (text(&info["enqueue"]["coalesced"])) } }
                    @for (stage, n) in info["enqueue"]["dropped"].as_object().into_iter().flatten() {
                        tr { th { "dropped: " (stage) } td { (n) } }
                    }
                }
            }
            div {
                h2 { "RBAC" }
                table {
                    tr { th { "where" } th { "apiGroup" } th { "resources" } th { "verbs" } }
                    @for rule in info["rbac"].as_array().into_iter().flatten() {
                        tr { td { (rule["namespace"].as_str().unwrap_or("cluster-wide")) }
                             td { (joined(&rule["apiGroups"])) }
                             td { (joined(&rule["resources"]))
                                  @if let Some(names) = rule["resourceNames"].as_array().filter(|n| !n.is_empty()) {
                                      " (" (names.iter().map(text).collect::<Vec<_>>().join(", ")) ")"
                                  } }
                             td { (joined(&rule["verbs"])) } }
                    }
                }
                (flows(&info["queue"]))
                h2 { "Autoscaler" }
                (pairs(&info["autoscaler"]))
                h2 { "Failures by reason" }
                (pairs(&info["failuresByReason"]))
            }
        }
        @let history = runtime.history();
        @if history.has_data() {
            h2 { "The last hour" }
            (charts(&history.series(Some(crd))))
        }
    }
}

pub async fn cr_list(runtimes: &Runtimes, runtime: &Watched, crd: &str) -> Markup {
    let list = match runtimes.fetch(runtime, &format!("/katalog/{}/cr", segment(crd))).await {
        Ok(list) => list,
        Err(error) => return html! { h1 { (crd) ": custom resources" } (unavailable(&error)) },
    };
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let base = format!("{BASE}/r/{}/crd/{}/cr", runtime.config.name, segment(crd));
    html! {
        h1 { (crd) ": custom resources " span.muted { "(" (text(&list["total"])) ")" } }
        @if items.is_empty() { p.muted { "none" } } @else {
            table.crs {
                tr { th { "name" } th { "namespace" } th { "ready" } th { "phase" } th { "generation" } th { "age" } }
                @for item in &items {
                    @let ns = item["namespace"].as_str().unwrap_or("-");
                    tr { td { a href={(base) "/" (segment(ns)) "/" (segment(item["name"].as_str().unwrap_or_default()))} { (text(&item["name"])) } }
                         td { (ns) } td { (badge(&text(&item["ready"]))) } td { (text(&item["phase"])) } td { (text(&item["generation"])) } td { (text(&item["age"])) } }
                }
            }
            @if list["total"].as_u64().unwrap_or(0) > items.len() as u64 {
                p.muted { "showing the first " (items.len()) }
            }
        }
    }
}

pub async fn cr(runtimes: &Runtimes, runtime: &Watched, crd: &str, namespace: &str, name: &str) -> Markup {
    let key = match namespace {
        "-" => segment(name),
        ns => format!("{}/{}", segment(ns), segment(name)),
    };
    let path = format!("/katalog/{}/cr/{key}", segment(crd));
    let cr = match runtimes.fetch(runtime, &path).await {
        Ok(cr) => cr,
        Err(error) => return html! { h1 { (name) } (unavailable(&error)) },
    };
    let events = runtimes.fetch(runtime, &format!("{path}/events")).await.ok();
    html! {
        h1 { (name) " " (badge(match cr["ready"].as_bool() { Some(true) => "ready", Some(false) => "not ready", None => "unknown" })) }
        div.muted { (crd) @if namespace != "-" { " in " (namespace) } " · generation " (text(&cr["generation"])) " · age " (text(&cr["age"])) @if cr["deleting"] == true { " · being deleted" } }
        h2 { "Conditions" }
        @let conditions = cr["conditions"].as_array().cloned().unwrap_or_default();
        @if conditions.is_empty() { p.muted { "none yet" } } @else {
            table {
                tr { th { "type" } th { "status" } th { "reason" } th { "message" } th { "since" } }
                @for c in &conditions {
                    tr { td { (text(&c["type"])) } td { (badge(&text(&c["status"]).to_lowercase())) } td { (text(&c["reason"])) }
                         td { (text(&c["message"])) } td { (text(&c["lastTransitionTime"])) } }
                }
            }
        }
        h2 { "Children" }
        @let children = cr["children"].as_object().cloned().unwrap_or_default();
        @if children.is_empty() { p.muted { "none seen" } } @else {
            table.children {
                tr { th { "kind" } th { "name" } th { "ready" } th { "replicas" } th { "why not" } }
                @for (kind, items) in &children {
                    @for item in items.as_array().into_iter().flatten() {
                        tr { td { (kind) } td { (text(&item["name"])) } td { (badge(&text(&item["ready"]))) }
                             td { @if !item["replicas"].is_null() { (text(&item["readyReplicas"])) " / " (text(&item["replicas"])) } }
                             td { (text(&item["reason"])) } }
                    }
                }
            }
        }
        h2 { "Events" }
        @match events.as_ref().and_then(|e| e["events"].as_array()) {
            Some(list) if !list.is_empty() => table.events {
                tr { th { "type" } th { "reason" } th { "message" } th { "count" } th { "age" } }
                @for e in list {
                    tr { td { (badge(&text(&e["type"]).to_lowercase())) } td { (text(&e["reason"])) } td { (text(&e["message"])) }
                         td { (text(&e["count"])) } td { (text(&e["age"])) } }
                }
            },
            _ => p.muted { "none" },
        }
        div.two {
            div { h2 { "Spec" } (json_block(&cr["spec"])) }
            div { h2 { "Status" } (json_block(&cr["status"])) }
        }
    }
}

/// A JSON list of strings as `a, b, c` (the core API group shows as `core`).
fn joined(list: &serde_json::Value) -> String {
    let items: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| match item.as_str() {
            Some("") => "core".to_string(),
            _ => text(item),
        })
        .collect();
    items.join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_flows_table_names_each_flow_its_backlog_by_class_and_its_waits() {
        let queue = json!({
            "fairness": {"by": "namespace", "weights": {}, "agingMs": 10000},
            "flows": [
                {"flow": "noisy", "queued": {"user": 3, "background": 2990}, "served": 10, "waitP50Ms": 1200.4, "waitP99Ms": 9000.0},
                {"flow": "", "queued": {"user": 0, "background": 0}, "served": 1, "waitP50Ms": null, "waitP99Ms": null},
            ],
        });
        let shown = flows(&queue).into_string();
        assert!(
            shown.contains("by namespace, background work ages after 10 s"),
            "{shown}"
        );
        assert!(
            shown.contains("<td>noisy</td><td>3 / 2990</td><td>10</td><td>1200 ms</td><td>9000 ms</td>"),
            "{shown}"
        );
        assert!(shown.contains("(none)"), "the cluster-wide flow is named: {shown}");
    }
}
