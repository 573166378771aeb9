//! `GET /katalog` of a standalone gateway: what it serves for each CRD (Serve API targets,
//! admission rules, protection, conversion), what its webhooks have answered and what
//! webhook intake took in, marked
//! `source: "gateway"` and keyed by group/version/resource as upstream's tooling reads it.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use orkestra_katalog::Compiled;

use crate::review::Counts;
use crate::{conversion, protection};

/// The gateway's view of the Katalog, with the webhooks' counts when they run and webhook
/// intake's per entry.
pub fn katalog(compiled: &Compiled, counts: Option<&Counts>, intake: Option<&crate::intake::Stats>) -> Value {
    let rules = crate::serving::rules(compiled);
    let crds: Vec<Value> = compiled
        .enabled()
        .map(|crd| {
            let targets: Vec<&str> = crd
                .serve
                .iter()
                .flat_map(|s| s.surfaces.values().filter(|t| t.enabled).map(|t| t.name.as_str()))
                .collect();
            json!({
                "name": &*crd.name,
                "gvr": format!("{}/{}/{}", crd.group, crd.version, crd.plural),
                "kind": crd.kind,
                "serve": {"enabled": crd.serve.is_some(), "targets": targets},
                "admission": {
                    "validation": rules && crd.admission_rules.validates(),
                    "mutation": rules && crd.admission_rules.mutates(),
                },
                "deletionProtection": {
                    "crs": protection::protects_crs(compiled, crd),
                    "crd": protection::protects_crd(compiled, crd),
                },
                "namespaceProtection": crd.namespaced && protection::namespaces(compiled).is_some(),
                "conversion": conversion::crds(compiled).any(|(c, _)| c.name == crd.name),
            })
        })
        .collect();
    let count = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
    let webhooks = counts.map(|c| {
        json!({
            "allowed": count(&c.allowed), "denied": count(&c.denied), "warned": count(&c.warned),
            "mutated": count(&c.mutated), "deletionBlocked": count(&c.deletion_blocked),
            "namespaceBlocked": count(&c.namespace_blocked), "converted": count(&c.converted),
            "conversionFailed": count(&c.conversion_failed), "callsFailed": count(&c.calls_failed),
            "conversionWindow": c.conversions.json(),
        })
    });
    json!({
        "source": "gateway",
        "katalog": compiled.katalog.name,
        "crds": crds,
        "webhooks": webhooks,
        "intake": intake.map(crate::intake::Stats::json),
    })
}
