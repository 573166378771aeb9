//! `enrich` / `enrichAll`: what the runtime reads about a CR's children after applying them,
//! embedded on each child in `.children` under an underscore key (`_pods`, `_warnings`, ...)
//! for status templates and notes. Each target may be gated (`- events: {when: [...]}`),
//! evaluated once the children are known, so a target costs no request when it is not needed.

use super::{Error, conditions};
use crate::model::EnrichItem;
use orkestra_expr::condition::Conditions;
use orkestra_expr::template::Functions;

/// What is read about a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Deployments, StatefulSets, ReplicaSets, Jobs: the pods they select, as `_pods`.
    Pods,
    /// Any child: its Warning events, as `_warnings`.
    Warnings,
    /// ReplicaSets: the controller that owns it, as `_owner`.
    Owner,
    /// Deployments: the ReplicaSets it owns, as `_replicaSets`.
    ReplicaSets,
    /// StatefulSets: the claims of its volumeClaimTemplates, as `_pvcs`.
    Pvcs,
    /// PersistentVolumeClaims: the bound volume, as `_pv`.
    BoundVolume,
    /// PersistentVolumes: the bound claim, as `_pvc`.
    BoundClaim,
    /// PersistentVolumeClaims: their StorageClass, as `_storageClass`.
    StorageClass,
    /// Services: the pods their selector picks, as `_backingPods`.
    BackingPods,
    /// Services: ready addresses from their EndpointSlices, as `_endpoints`.
    Endpoints,
    /// Pods: the node's topology, as `_node`.
    Node,
    /// HPAs: `_currentMetrics` and `_scaleTarget`.
    Hpa,
    /// CronJobs: `_activeJobs`, `_lastJob`, `_lastSuccessfulJob`.
    CronJob,
    /// Ingresses: `_loadBalancerIPs` and `_tlsSecrets`.
    Ingress,
}

/// Every target with the names upstream accepts for it (the first is the canonical one).
const NAMES: &[(Target, &[&str])] = &[
    (Target::Pods, &["pods", "pod"]),
    (Target::Warnings, &["events", "warnings", "event", "ev"]),
    (Target::Owner, &["owner"]),
    (Target::ReplicaSets, &["replicasets", "replicaset", "rs"]),
    (Target::Pvcs, &["pvcs"]),
    (Target::BoundVolume, &["pvc", "pvclaim", "persistentvolumeclaim"]),
    (Target::BoundClaim, &["pv", "pvs", "persistentvolume"]),
    (Target::StorageClass, &["storageclass", "sc", "storageclasses"]),
    (Target::BackingPods, &["backingpods"]),
    (Target::Endpoints, &["endpoints", "ep", "endpointslice"]),
    (Target::Node, &["node"]),
    (Target::Hpa, &["hpa", "horizontalpodautoscaler"]),
    (Target::CronJob, &["cronjob", "cj", "cronjobs"]),
    (Target::Ingress, &["ingress", "ing", "ingresses"]),
];

impl Target {
    fn named(name: &str) -> Option<Self> {
        let name = name.to_lowercase();
        NAMES
            .iter()
            .find(|(_, names)| names.contains(&name.as_str()))
            .map(|(target, _)| *target)
    }

    /// The canonical name.
    pub fn name(self) -> &'static str {
        NAMES.iter().find(|(t, _)| *t == self).map_or("", |(_, names)| names[0])
    }

    /// Whether the target reads anything about a child of `kind`.
    pub fn applies_to(self, kind: &str) -> bool {
        match self {
            Target::Pods => matches!(kind, "Deployment" | "StatefulSet" | "ReplicaSet" | "Job"),
            Target::Warnings => true,
            Target::Owner => kind == "ReplicaSet",
            Target::ReplicaSets => kind == "Deployment",
            Target::Pvcs => kind == "StatefulSet",
            Target::BoundVolume | Target::StorageClass => kind == "PersistentVolumeClaim",
            Target::BoundClaim => kind == "PersistentVolume",
            Target::BackingPods | Target::Endpoints => kind == "Service",
            Target::Node => kind == "Pod",
            Target::Hpa => kind == "HorizontalPodAutoscaler",
            Target::CronJob => kind == "CronJob",
            Target::Ingress => kind == "Ingress",
        }
    }
}

/// One target and its gate.
#[derive(Debug, Clone)]
pub struct Enrichment {
    pub target: Target,
    pub conditions: Conditions,
}

/// The CRD's enrichments: `enrich` (a list of names, or of `{name: {when, or}}`), or every
/// target with `enrichAll: true`.
pub fn compile(enrich: Option<&[EnrichItem]>, all: bool, functions: &Functions) -> Result<Vec<Enrichment>, Error> {
    if all {
        if enrich.is_some() {
            return Err(Error::at("enrichAll", "enrich and enrichAll are exclusive: keep one"));
        }
        return Ok(NAMES
            .iter()
            .map(|(target, _)| Enrichment {
                target: *target,
                conditions: Conditions::default(),
            })
            .collect());
    }
    let mut compiled: Vec<Enrichment> = Vec::new();
    for (i, item) in enrich.into_iter().flatten().enumerate() {
        let at = format!("enrich[{i}]");
        let (name, gate) = match item {
            EnrichItem::Name(name) => (name, None),
            EnrichItem::Gated(name, gate) => (name, Some(gate)),
        };
        let target = Target::named(name).ok_or_else(|| {
            let all: Vec<&str> = NAMES.iter().flat_map(|(_, names)| names.iter().copied()).collect();
            let best = orkestra_expr::text::closest(name, &all).unwrap_or("pods");
            Error::at(
                at.clone(),
                format!("unknown enrichment target \"{name}\"; the closest is \"{best}\""),
            )
        })?;
        if compiled.iter().any(|e| e.target == target) {
            return Err(Error::at(at, format!("{} is listed twice", target.name())));
        }
        let conditions = match gate {
            None => Conditions::default(),
            Some(gate) => conditions(&gate.when, &gate.or, functions).map_err(|e| e.within(&format!("{at}.{name}")))?,
        };
        compiled.push(Enrichment { target, conditions });
    }
    Ok(compiled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(yaml: &str) -> Result<Vec<Enrichment>, String> {
        let node = crate::yaml::parse(yaml).unwrap();
        let (items, problems) = crate::de::read::<Vec<EnrichItem>>(&node, "").map_err(|p| p.message)?;
        assert!(problems.is_empty(), "{problems:?}");
        compile(Some(&items), false, Functions::builtin()).map_err(|e| e.to_string())
    }

    #[test]
    fn targets_are_read_by_any_of_their_names_with_an_optional_gate() {
        let list =
            compiled("[pod, Warnings, {replicasets: {when: [{field: spec.replicas, greaterThan: 1}]}}]").unwrap();
        let targets: Vec<Target> = list.iter().map(|e| e.target).collect();
        assert_eq!(targets, [Target::Pods, Target::Warnings, Target::ReplicaSets]);
        assert!(list[0].conditions.is_empty());
        assert!(
            !list[2].conditions.is_empty(),
            "a number in the gate reads as it does elsewhere"
        );
        assert!(Target::Pods.applies_to("Job") && !Target::Pods.applies_to("Service"));
    }

    #[test]
    fn unknown_repeated_and_exclusive_forms_are_errors() {
        let unknown = compiled("[podz]").unwrap_err();
        assert!(
            unknown.contains("enrich[0]: unknown enrichment target \"podz\"; the closest is \"pods\""),
            "{unknown}"
        );
        assert!(compiled("[pods, pod]").unwrap_err().contains("pods is listed twice"));
        let both = compile(Some(&[EnrichItem::Name("pods".into())]), true, Functions::builtin()).unwrap_err();
        assert!(both.to_string().contains("enrich and enrichAll are exclusive"));
        assert_eq!(compile(None, true, Functions::builtin()).unwrap().len(), NAMES.len());
    }
}
