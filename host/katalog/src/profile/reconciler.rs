//! Reconciler profiles: `reconcile.profile` names a preset of workers, resync and queue
//! settings, a user one from the Katalog's `profiles.reconciler` or a built-in. What the
//! CRD writes itself wins over the preset. Applied at load, so a compiled CRD (and a reload's
//! comparison of one) holds the settings it runs with.
//!
//! The built-ins are upstream's: `high-throughput` (10 workers, resync 5m, queue depth
//! 1000), `conservative` (2, 1m, 100) and `development` (1, 30s, 50).
//!
//! `runtime.autoscale: {profile: burst}` stands for a whole autoscale block, derived from the
//! CRD's settings (after its reconcile profile) as upstream's examples describe it: four
//! times the workers and ten times the queue depth (of 100 when the queue is unbounded)
//! while the queue is deeper than 60% of that, checked every 5s, 30s of cooldown.

use serde::Deserialize;

use super::registry::Registry;
use crate::de::Problem;
use crate::loaded::{Parsed, crd_node};
use crate::model::{Autoscale, AutoscaleDo, Queue, Reconcile};
use orkestra_expr::text::closest;

/// One preset: what it sets when the CRD leaves it unset.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Preset {
    #[serde(default)]
    workers: Option<i64>,
    #[serde(default)]
    resync: Option<String>,
    #[serde(default)]
    queue: Option<Queue>,
}

const BUILT_IN: [&str; 3] = ["high-throughput", "conservative", "development"];

fn built_in(name: &str) -> Option<Preset> {
    let (workers, resync, max_depth) = match name {
        "high-throughput" => (10, "5m", 1000),
        "conservative" => (2, "1m", 100),
        "development" => (1, "30s", 50),
        _ => return None,
    };
    Some(Preset {
        workers: Some(workers),
        resync: Some(resync.into()),
        queue: Some(Queue {
            max_depth,
            ..Queue::default()
        }),
    })
}

/// The preset `name` names: the user's (read as a reconciler preset), else a built-in.
fn preset(name: &str, registry: &Registry) -> Result<Preset, String> {
    if let Some(user) = registry.get("reconciler", name) {
        let body = serde_json::Value::Object(user.body.clone());
        return Preset::deserialize(&body).map_err(|e| {
            format!(
                "the reconciler profile \"{}\" ({}) is not a preset of workers, resync and queue: {e}",
                user.name, user.origin
            )
        });
    }
    if let Some(preset) = built_in(&name.to_lowercase()) {
        return Ok(preset);
    }
    let mut known: Vec<&str> = registry.of("reconciler").map(|p| p.name.as_str()).collect();
    known.extend(BUILT_IN);
    let best = closest(name, &known).unwrap_or("high-throughput");
    Err(format!(
        "unknown reconciler profile \"{name}\"; the closest is \"{best}\" (built in: {}, or define it under profiles.reconciler)",
        BUILT_IN.join(", ")
    ))
}

/// Fills every CRD's reconcile settings from the profile it names and expands autoscale
/// presets; an unknown profile is a problem at its place.
pub(super) fn apply(parsed: &mut [Parsed], registry: &Registry, problems: &mut Vec<Problem>) {
    for Parsed { node, file } in parsed.iter_mut() {
        for (name, entry) in &mut file.spec.crds {
            let at = |path: &str| {
                crd_node(node, name)
                    .map(|crd| crd.at_path(path).0.pos)
                    .unwrap_or(node.pos)
            };
            if let Some(reconcile) = entry.operator_box.reconcile.as_mut()
                && let Some(profile) = reconcile.profile.clone()
            {
                match preset(&profile, registry) {
                    Ok(preset) => fill(reconcile, preset),
                    Err(message) => problems.push(Problem {
                        path: format!("spec.crds.{name}.operatorBox.reconcile.profile"),
                        pos: at("operatorBox.reconcile.profile"),
                        message,
                    }),
                }
            }
            let autoscale = entry.operator_box.runtime.as_mut().and_then(|r| r.autoscale.as_mut());
            if let Some(autoscale) = autoscale.filter(|a| a.profile.is_some()) {
                let reconcile = entry.operator_box.reconcile.clone().unwrap_or_default();
                if let Err(message) = expand_autoscale(autoscale, &reconcile) {
                    problems.push(Problem {
                        path: format!("spec.crds.{name}.operatorBox.runtime.autoscale.profile"),
                        pos: at("operatorBox.runtime.autoscale.profile"),
                        message,
                    });
                }
            }
        }
    }
}

/// Reference depth of an unbounded queue for the `burst` autoscale profile.
const BURST_BASE_DEPTH: u32 = 100;

/// Replaces an autoscale block that names a profile with what the profile stands for.
fn expand_autoscale(autoscale: &mut Autoscale, reconcile: &Reconcile) -> Result<(), String> {
    let profile = autoscale.profile.take().unwrap_or_default();
    if profile != "burst" {
        return Err(format!(
            "unknown autoscale profile \"{profile}\"; the one there is: burst"
        ));
    }
    if autoscale.interval.is_some()
        || autoscale.cooldown.is_some()
        || autoscale.conditions != Default::default()
        || autoscale.do_ != AutoscaleDo::default()
    {
        return Err("a profile stands for the whole autoscale block: drop interval, cooldown, conditions and do, or drop the profile".into());
    }
    let workers = u32::try_from(reconcile.workers.unwrap_or(1).clamp(1, 50)).unwrap_or(1);
    let base = match reconcile.queue.max_depth {
        0 => BURST_BASE_DEPTH,
        depth => depth,
    };
    let depth = base.saturating_mul(10);
    let threshold = u64::from(depth) * 6 / 10;
    let condition = serde_json::from_value(serde_json::json!({
        "field": "metrics.queueDepth", "greaterThan": threshold.to_string(),
    }))
    .map_err(|e| e.to_string())?;
    *autoscale = Autoscale {
        profile: None,
        interval: Some("5s".into()),
        cooldown: Some("30s".into()),
        conditions: orkestra_expr::condition::ConditionsSpec {
            when: vec![condition],
            or: Vec::new(),
        },
        do_: AutoscaleDo {
            workers: Some((workers * 4).min(50)),
            queue_depth: Some(depth),
            resync: None,
        },
    };
    Ok(())
}

/// The preset under what the CRD set itself.
fn fill(reconcile: &mut Reconcile, preset: Preset) {
    reconcile.workers = reconcile.workers.or(preset.workers);
    reconcile.resync = reconcile.resync.take().or(preset.resync);
    let Some(queue) = preset.queue else { return };
    let own = &mut reconcile.queue;
    own.failure_threshold = own.failure_threshold.or(queue.failure_threshold);
    own.retry_backoff = own.retry_backoff.take().or(queue.retry_backoff);
    if own.max_depth == 0 {
        own.max_depth = queue.max_depth;
    }
    if own.behaviour.is_none() {
        own.behaviour = queue.behaviour;
    }
    own.fairness = own.fairness.take().or(queue.fairness);
    own.priority = own.priority.take().or(queue.priority);
    own.shared |= queue.shared;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_fills_only_what_the_crd_left_unset() {
        let mut reconcile = Reconcile {
            workers: Some(3),
            ..Reconcile::default()
        };
        fill(&mut reconcile, built_in("high-throughput").unwrap());
        assert_eq!(reconcile.workers, Some(3), "the CRD's own value wins");
        assert_eq!(reconcile.resync.as_deref(), Some("5m"));
        assert_eq!(reconcile.queue.max_depth, 1000);
        assert!(built_in("turbo").is_none());
    }

    #[test]
    fn the_burst_profile_stands_for_a_whole_autoscale_block() {
        let reconcile = Reconcile {
            workers: Some(2),
            ..Reconcile::default()
        };
        let mut autoscale = Autoscale {
            profile: Some("burst".into()),
            ..Autoscale::default()
        };
        expand_autoscale(&mut autoscale, &reconcile).unwrap();
        assert_eq!(
            (
                autoscale.do_.workers,
                autoscale.do_.queue_depth,
                autoscale.interval.as_deref()
            ),
            (Some(8), Some(1000), Some("5s"))
        );
        let condition = serde_json::to_value(&autoscale.conditions.when[0]).unwrap();
        assert_eq!(condition["field"], "metrics.queueDepth");
        assert_eq!(condition["greaterThan"], "600");
        let mut mixed = Autoscale {
            profile: Some("burst".into()),
            cooldown: Some("1m".into()),
            ..Autoscale::default()
        };
        assert!(
            expand_autoscale(&mut mixed, &reconcile)
                .unwrap_err()
                .contains("whole autoscale block")
        );
        let mut unknown = Autoscale {
            profile: Some("gentle".into()),
            ..Autoscale::default()
        };
        assert!(
            expand_autoscale(&mut unknown, &reconcile)
                .unwrap_err()
                .contains("\"gentle\"")
        );
    }
}
