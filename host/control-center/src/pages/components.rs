//! A runtime's Wasm components (revision, digest, source, latency, outcomes, traps,
//! denials, memory, instances, grants, limits, swap history), the runtimes manager, and the sign-in
//! form.

use maud::{Markup, html};
use serde_json::Value;

use super::layout::{BASE, badge, csrf_field, figure, notice, pairs, text};
use crate::csrf::Token;
use crate::runtimes::{Runtimes, Watched};

fn ms(value: &Value) -> String {
    value.as_f64().map_or("-".into(), |v| format!("{v:.2} ms"))
}

/// As [`ms`], in microseconds below one millisecond.
fn short(value: &Value) -> String {
    match value.as_f64() {
        Some(v) if v < 1.0 => format!("{:.0} µs", v * 1e3),
        _ => ms(value),
    }
}

pub fn components(runtime: &Watched) -> Markup {
    let seen = runtime.seen();
    let list = seen
        .components
        .as_ref()
        .and_then(|c| c["components"].as_array().cloned())
        .unwrap_or_default();
    html! {
        h1 { "Components on " (runtime.config.name) }
        @if !seen.up { (notice(&format!("unreachable: {}; showing what it said last", seen.last_error.as_deref().unwrap_or("")))) }
        @if list.is_empty() { p.muted { "This runtime hosts no Wasm component." } }
        @for c in &list {
            @let calls = &c["calls"];
            div.card.component data-component=(text(&c["name"])) {
                h3 { span { (text(&c["name"])) " " span.muted { (text(&c["world"])) } }
                     (badge(if c["lastError"].is_null() { "Serving" } else if c["revision"] == 0 { "failed" } else { "degraded" })) }
                div.muted { (text(&c["source"])) }
                div.figures {
                    (figure("revision", text(&c["revision"])))
                    (figure("calls", text(&calls["calls"])))
                    (figure("p50", ms(&calls["p50Ms"])))
                    (figure("p99", ms(&calls["p99Ms"])))
                    (figure("traps", text(&calls["traps"])))
                    (figure("denials", text(&calls["denials"])))
                    (figure("memory high-water", format!("{} KiB", calls["memoryHighWaterBytes"].as_u64().unwrap_or(0) / 1024)))
                }
                @if let Some(phases) = calls["phasesP50Ms"].as_object().filter(|p| !p.is_empty()) {
                    div.muted.phases { "p50 by phase: "
                        @for (i, (phase, took)) in phases.iter().enumerate() { @if i > 0 { " · " } (phase) " " (short(took)) } }
                }
                (instances(&c["instances"], &calls["instances"]))
                (rollout(&c["rollout"]))
                div.muted { "sha256 " (text(&c["digest"])) " · loaded " (text(&c["loadedAt"])) " in " (ms(&c["loadMs"])) @if c["cached"] == true { " (cached)" } }
                @if let Some(error) = c["lastError"].as_str() { div.error { (error) } }
                @if let Some(error) = calls["lastCallError"].as_str() { div.error { "last call: " (error) } }
                div.two {
                    div {
                        h2 { "Outcomes" }
                        table { @for (outcome, n) in calls["outcomes"].as_object().into_iter().flatten() { tr { th { (outcome) } td { (n) } } } }
                        h2 { "Grants" }
                        @let grants = c["grants"].as_array().cloned().unwrap_or_default();
                        @if grants.is_empty() { p.muted { "none: it may only return children and status" } }
                        ul { @for g in &grants { li { (text(g)) } } }
                    }
                    div {
                        h2 { "Hot-swap history" }
                        table {
                            tr { th { "at" } th { "revision" } th { "outcome" } }
                            @for swap in calls["swaps"].as_array().into_iter().flatten().rev() {
                                tr { td { (text(&swap["at"])) } td { (text(&swap["revision"])) }
                                     td { @match swap["error"].as_str() { Some(e) => span.error { "refused: " (e) }, None => span { "serving " (text(&swap["digest"]).chars().take(12).collect::<String>()) } } } }
                            }
                        }
                        h2 { "Limits" }
                        (pairs(&c["limits"]))
                    }
                }
            }
        }
    }
}

/// The rollout policy, a new version serving its share now, and the last steps.
fn rollout(rollout: &Value) -> Markup {
    let digest = |v: &Value| text(v).chars().take(12).collect::<String>();
    html! {
        @if rollout.is_object() {
            div.rollout {
                @let policy = &rollout["policy"];
                @if policy.is_object() {
                    div.muted { "rollout: a new version serves " (text(&policy["share"])) "% of the CRs first, every CR after "
                        (policy["promoteAfterMs"].as_u64().unwrap_or(0) / 1000) " s, and goes back when more than "
                        (text(&policy["maxErrorPercent"])) "% of at least " (text(&policy["minReconciles"])) " reconciles fail" }
                }
                @let canary = &rollout["canary"];
                @if canary.is_object() {
                    div.canary { (badge("rolling out")) " sha256 " (digest(&canary["digest"])) " (revision " (text(&canary["revision"])) ") · "
                        (text(&canary["reconciles"])) " reconciles, " (text(&canary["failed"])) " failed · " (promotion(canary, policy)) }
                }
                @if let Some(refused) = rollout["refused"].as_str() {
                    div.error { "sha256 " (refused.chars().take(12).collect::<String>()) " was rolled back: not rolled out again until the declared component changes" }
                }
                @let history = rollout["history"].as_array().cloned().unwrap_or_default();
                @if !history.is_empty() {
                    h2 { "Rollouts" }
                    table.rollouts {
                        tr { th { "at" } th { "step" } th { "revision" } th { "version" } th { "" } }
                        @for step in history.iter().rev() {
                            tr { td { (text(&step["at"])) } td { (text(&step["step"])) } td { (text(&step["revision"])) }
                                 td { "sha256 " (digest(&step["digest"])) } td { (text(&step["message"])) } }
                        }
                    }
                }
            }
        }
    }
}

/// When a canary is to be promoted: a promotion still to come, and what it depends on.
fn promotion(canary: &Value, policy: &Value) -> String {
    let within = match policy["maxErrorPercent"].as_u64() {
        Some(percent) => format!(" if no more than {percent}% of its reconciles fail"),
        None => String::new(),
    };
    match canary["promotesInMs"].as_u64().unwrap_or(0) / 1000 {
        0 => format!("promotion due now{within}"),
        seconds => format!("to be promoted in {seconds} s{within}"),
    }
}

/// How the component's calls get their instance, and how many were kept and given up.
fn instances(declared: &Value, used: &Value) -> Markup {
    html! {
        div.muted.instances {
            @if declared["reuse"] == "warm" {
                "instances: warm, each for at most " (text(&declared["maxCalls"])) " calls and "
                (declared["memoryHighWaterBytes"].as_u64().unwrap_or(0) >> 20) " MiB · "
                (text(&used["reused"])) " calls on a kept one, " (text(&used["fresh"])) " on a new one"
                @for (why, n) in used["retired"].as_object().into_iter().flatten().filter(|(_, n)| **n != 0) {
                    " · given up (" (why) "): " (text(n))
                }
            } @else {
                "instances: a fresh one per call"
            }
        }
    }
}

pub fn manager(runtimes: &Runtimes, error: Option<&str>, token: &Token) -> Markup {
    html! {
        h1 { "Runtimes" }
        @if let Some(error) = error { p.error { (error) } }
        form.add method="post" action={(BASE) "/runtimes"} {
            (csrf_field(token))
            input name="url" placeholder="http://runtime:8080" required;
            input name="name" placeholder="name (optional)";
            input name="tokenEnv" placeholder="token variable (optional)";
            button.primary type="submit" { "Add runtime" }
        }
        table {
            tr { th { "name" } th { "URL" } th { "state" } th { "last answered" } th {} }
            @for runtime in runtimes.all() {
                @let seen = runtime.seen();
                tr {
                    td { a href={(BASE) "/r/" (runtime.config.name)} { (runtime.config.name) } }
                    td { (runtime.config.url) }
                    td { (badge(if seen.up { "up" } else { "unreachable" })) @if let Some(e) = &seen.last_error { div.error { (e) } } }
                    td { @if let Some(at) = seen.last_seen { (at) } @else { "never" } }
                    td { form method="post" action={(BASE) "/runtimes/" (runtime.config.name) "/remove"} { (csrf_field(token)) button.danger type="submit" { "Remove" } } }
                }
            }
        }
    }
}

pub fn sign_in(failed: bool, token: &Token) -> Markup {
    html! {
        div.card.login {
            h1 { "Sign in" }
            @if failed { p.error { "That is not the admin password." } }
            form method="post" action={(BASE) "/login"} {
                (csrf_field(token))
                label { "User" input name="user" value="admin"; }
                label { "Password" input name="password" type="password" autofocus; }
                button.primary type="submit" { "Sign in" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_rollout_shows_its_policy_its_canary_and_its_steps() {
        let shown = rollout(&json!({
            "policy": {"share": 20, "promoteAfterMs": 600000, "maxErrorPercent": 10, "minReconciles": 5},
            "canary": {"revision": 3, "digest": "abcdef0123456789", "startedAt": "t", "promotesInMs": 42000, "reconciles": 7, "failed": 1},
            "refused": null,
            "history": [{"at": "t1", "step": "started", "revision": 3, "digest": "abcdef0123456789", "message": "serves 20%"}],
        }))
        .into_string();
        for expected in [
            "a new version serves 20% of the CRs first, every CR after 600 s, and goes back when more than 10% of at least 5 reconciles fail",
            "rolling out</span> sha256 abcdef012345 (revision 3) · 7 reconciles, 1 failed · to be promoted in 42 s if no more than 10% of its reconciles fail",
            "<td>started</td>",
        ] {
            assert!(shown.contains(expected), "{expected} in {shown}");
        }
        let refused =
            rollout(&json!({"policy": null, "canary": null, "refused": "ffff00001111", "history": []})).into_string();
        assert!(refused.contains("sha256 ffff00001111 was rolled back"), "{refused}");
        assert_eq!(rollout(&Value::Null).into_string(), "");
    }

    #[test]
    fn warm_instances_show_their_bounds_their_use_and_why_they_were_given_up() {
        let declared = json!({"reuse": "warm", "maxCalls": 1000, "memoryHighWaterBytes": 32 << 20});
        let used =
            json!({"fresh": 2, "reused": 98, "retired": {"max_calls": 0, "memory_high_water": 0, "failed_call": 1}});
        let shown = instances(&declared, &used).into_string();
        assert!(
            shown.contains("instances: warm, each for at most 1000 calls and 32 MiB · 98 calls on a kept one, 2 on a new one · given up (failed_call): 1"),
            "{shown}"
        );
        assert!(
            !shown.contains("max_calls"),
            "reasons that never happened are left out: {shown}"
        );
        let fresh = instances(&json!({"reuse": "fresh"}), &used).into_string();
        assert!(fresh.contains("a fresh one per call"), "{fresh}");
    }
}
