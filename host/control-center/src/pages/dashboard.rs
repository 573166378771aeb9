//! The dashboard (every runtime and its Katalog at a glance, with the last hour's charts)
//! and a runtime's Katalog panel (its CRDs as cards, their queue pressure, the gated ones
//! with why, and the `dependsOn` graph).

use maud::{Markup, html};
use serde_json::Value;

use super::draw::{Node, charts, dependency_graph};
use super::layout::{BASE, badge, figure, notice, text};
use crate::runtimes::{Runtimes, Seen, Watched};

fn sum(crds: &[Value], f: impl Fn(&Value) -> u64) -> u64 {
    crds.iter().map(f).sum()
}

fn crds(seen: &Seen) -> Vec<Value> {
    seen.katalog
        .as_ref()
        .and_then(|k| k["crds"].as_array().cloned())
        .unwrap_or_default()
}

/// The state of a runtime as one word.
fn runtime_state(seen: &Seen) -> &'static str {
    match (
        seen.up,
        seen.konductor,
        seen.katalog.as_ref().map(|k| k["healthy"] == true),
    ) {
        (false, _, _) => "unreachable",
        (true, Some(false), _) => "follower",
        (true, _, Some(false)) => "degraded",
        (true, _, _) => "healthy",
    }
}

pub fn dashboard(runtimes: &Runtimes) -> Markup {
    let all = runtimes.all();
    html! {
        h1 { "Runtimes" }
        @if all.is_empty() {
            (notice("No runtime is watched yet: add one under Runtimes, or start with --runtime URL."))
        }
        div.grid {
            @for runtime in &all {
                (runtime_card(runtime))
            }
        }
        @for runtime in &all {
            @let history = runtime.history();
            @if history.has_data() {
                h2 { (runtime.config.name) ": the last hour" }
                (charts(&history.series(None)))
            }
        }
    }
}

fn runtime_card(runtime: &Watched) -> Markup {
    let seen = runtime.seen();
    let crds = crds(&seen);
    let state = runtime_state(&seen);
    let name = &runtime.config.name;
    let total = sum(&crds, |c| c["reconciles"]["total"].as_u64().unwrap_or(0));
    let failed = sum(&crds, |c| c["reconciles"]["failed"].as_u64().unwrap_or(0));
    html! {
        div class={"card runtime state-" (if state == "healthy" { "healthy" } else if state == "unreachable" || state == "degraded" { "degraded" } else { "pending" })} data-runtime=(name) {
            h3 { a href={(BASE) "/r/" (name)} { (name) } (badge(state)) }
            div.muted { (runtime.config.url) }
            @if let Some(katalog) = &seen.katalog {
                div { "Katalog " strong { (katalog["name"].as_str().unwrap_or("-")) } }
                div.figures {
                    (figure("CRDs", crds.len()))
                    (figure("workers", sum(&crds, |c| c["workers"]["current"].as_u64().unwrap_or(0))))
                    (figure("custom resources", sum(&crds, |c| c["crCount"].as_u64().unwrap_or(0))))
                    (figure("failed / reconciles", format!("{failed} / {total}")))
                }
                div.muted {
                    @for (state, n) in katalog["statusCounts"].as_object().into_iter().flatten() {
                        @if n.as_u64().unwrap_or(0) > 0 { span { (state) ": " (n) " " } }
                    }
                }
            }
            @if let Some(error) = &seen.last_error {
                div.error { (error) }
                @if let Some(at) = seen.last_seen { div.muted { "last answered " (at) "; asking again at every poll" } }
            }
            div { a href={(BASE) "/r/" (name) "/components"} { "components" } }
        }
    }
}

/// A runtime's Katalog: its CRDs and their dependencies.
pub fn katalog_panel(runtime: &Watched, gateway: Option<(String, Value)>) -> Markup {
    let seen = runtime.seen();
    let name = &runtime.config.name;
    let crds = crds(&seen);
    let Some(katalog) = &seen.katalog else {
        return html! {
            h1 { (name) }
            (notice(&format!("{name} has not answered yet: {}", seen.last_error.as_deref().unwrap_or("waiting for the first poll"))))
        };
    };
    let nodes: Vec<Node<'_>> = crds
        .iter()
        .map(|crd| Node {
            name: crd["name"].as_str().unwrap_or_default(),
            state: crd["state"].as_str().unwrap_or("pending"),
            depends_on: crd["dependsOn"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| {
                    (
                        d["name"].as_str().unwrap_or_default(),
                        d["condition"].as_str().unwrap_or_default(),
                        d["met"] == true,
                    )
                })
                .collect(),
        })
        .collect();
    html! {
        h1 { "Katalog " (katalog["name"].as_str().unwrap_or("-")) " on " (name) " " (badge(runtime_state(&seen))) }
        @if !seen.up { (notice(&format!("unreachable: {}; showing what it said last", seen.last_error.as_deref().unwrap_or("")))) }
        @if let Some(reason) = katalog["degradedReason"].as_str() { p.error { (reason) } }
        @if katalog["serveEnabled"] == true {
            p { a.create href={(BASE) "/r/" (name) "/create"} { "+ Create a custom resource" } }
        }
        div.grid {
            @for crd in &crds { (crd_card(name, crd)) }
        }
        @if let Some((source, stats)) = &gateway { (gateway_panel(source, stats)) }
        h2 { "dependsOn" }
        @if nodes.iter().all(|n| n.depends_on.is_empty()) {
            p.muted { "No CRD of this Katalog depends on another." }
        }
        (dependency_graph(&nodes))
        @let history = runtime.history();
        @if history.has_data() {
            h2 { "The last hour" }
            (charts(&history.series(None)))
        }
    }
}

/// What the Katalog's gateway serves, what its webhooks answered and what intake took in.
fn gateway_panel(source: &str, stats: &Value) -> Markup {
    let yes = |v: &Value| if *v == true { "yes" } else { "-" };
    html! {
        div.gateway {
            h2 { "Gateway " span.muted { "(" (source) ")" } }
            @if let Some(webhooks) = stats["webhooks"].as_object() {
                div.figures {
                    @for (name, count) in webhooks { (figure(name, count.as_u64().unwrap_or(0))) }
                }
            } @else { p.muted { "No webhooks: the Katalog enables none." } }
            @if let Some(intake) = stats["intake"].as_array().filter(|a| !a.is_empty()) {
                h3 { "Webhook intake" }
                table.intake {
                    tr { th { "entry" } th { "provider" } th { "path" } th { "received" } th { "applied" } th { "failed" } th { "refused" } th { "ignored" } th { "busy" } th { "last" } }
                    @for entry in intake {
                        tr data-entry=(text(&entry["name"])) {
                            td { (text(&entry["name"])) }
                            td { (text(&entry["provider"])) }
                            td { code { (text(&entry["path"])) } }
                            @for count in ["received", "applied", "failed", "refused", "ignored", "busy"] {
                                td { (entry[count].as_u64().unwrap_or(0)) }
                            }
                            td { @if let Some(last) = entry["last"]["outcome"].as_str() { (last) } @else { "-" } }
                        }
                    }
                }
            }
            table {
                tr { th { "CRD" } th { "serve targets" } th { "validation" } th { "mutation" } th { "deletion protection" } th { "namespace protection" } th { "conversion" } }
                @for crd in stats["crds"].as_array().into_iter().flatten() {
                    @let targets: Vec<&str> = crd["serve"]["targets"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                    tr {
                        td { (text(&crd["name"])) }
                        td { @if targets.is_empty() { "-" } @else { (targets.join(", ")) } }
                        td { (yes(&crd["admission"]["validation"])) }
                        td { (yes(&crd["admission"]["mutation"])) }
                        td { (yes(&crd["deletionProtection"]["crs"])) }
                        td { (yes(&crd["namespaceProtection"])) }
                        td { (yes(&crd["conversion"])) }
                    }
                }
            }
        }
    }
}

fn crd_card(runtime: &str, crd: &Value) -> Markup {
    let name = crd["name"].as_str().unwrap_or_default();
    let state = crd["state"].as_str().unwrap_or("pending");
    let depth = crd["queue"]["depth"].as_u64().unwrap_or(0);
    let max = crd["queue"]["maxDepth"].as_u64().unwrap_or(0);
    // Pressure: against the limit when there is one, else against the workers' capacity.
    let capacity = if max > 0 {
        max
    } else {
        crd["workers"]["current"].as_u64().unwrap_or(1).max(1) * 10
    };
    let pressure = (depth * 100 / capacity.max(1)).min(100);
    html! {
        div class={"card crd state-" (state)} data-crd=(name) {
            h3 { a href={(BASE) "/r/" (runtime) "/crd/" (name)} { (name) } (badge(state)) }
            div.muted { (crd["gvk"].as_str().unwrap_or_default()) }
            div.figures {
                (figure("custom resources", crd["crCount"].as_u64().unwrap_or(0)))
                (figure("workers", format!("{} / {}", crd["workers"]["busy"].as_u64().unwrap_or(0), crd["workers"]["current"].as_u64().unwrap_or(0))))
                (figure("error rate", format!("{}%", crd["errorRatePercent"].as_u64().unwrap_or(0))))
                (figure("p99", format!("{} ms", crd["reconcileP99Ms"].as_u64().unwrap_or(0))))
            }
            div.muted { "queue " (depth) @if max > 0 { " of " (max) } }
            div class={"bar" (if pressure >= 80 { " hot" } else { "" })} { div style={"width:" (pressure) "%"} {} }
            @if let Some(why) = crd["gatedReason"].as_str() { div.why { "gated: " (why) } }
            @if let Some(why) = crd["waitingFor"].as_str() { div.why { (why) } }
            @if state == "pending" {
                @for d in crd["dependsOn"].as_array().into_iter().flatten().filter(|d| d["met"] != true) {
                    div.why { "waits for " (d["name"].as_str().unwrap_or_default()) " to be " (d["condition"].as_str().unwrap_or_default()) }
                }
            }
            @if let Some(error) = crd["lastError"].as_str() { div.error { "last error: " (error) } }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn the_gateway_panel_lists_each_intake_entry_with_its_counts() {
        let stats = json!({
            "crds": [], "webhooks": null,
            "intake": [{"name": "repo", "provider": "github", "path": "/webhooks/github/sites",
                        "received": 4, "applied": 1, "failed": 0, "refused": 1, "ignored": 1, "busy": 0,
                        "last": {"outcome": "applied Site web/blog through target site"}}],
        });
        let html = super::gateway_panel("runtime", &stats).into_string();
        assert!(html.contains("<tr data-entry=\"repo\"><td>repo</td><td>github</td><td><code>/webhooks/github/sites</code></td><td>4</td><td>1</td><td>0</td><td>1</td><td>1</td><td>0</td><td>applied Site web/blog through target site</td></tr>"), "{html}");
        let none = super::gateway_panel("runtime", &json!({"crds": [], "intake": null})).into_string();
        assert!(!none.contains("Webhook intake"));
    }
}
