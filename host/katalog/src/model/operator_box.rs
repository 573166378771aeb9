//! `operatorBox`: observe, preReconcile, runtime, reconcile and emit.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::calls::{ExternalCall, RetryBackoff};
use super::components::{ConstructorSpec, HooksSpec, Import};
use super::resources::HookTemplates;
use orkestra_expr::condition::{ConditionSpec, ConditionsSpec, ValueType};

/// What one CRD (or one serve target) does.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorBox {
    #[serde(default)]
    pub observe: Option<Observe>,
    #[serde(default)]
    pub pre_reconcile: Option<PreReconcile>,
    #[serde(default)]
    pub runtime: Option<Runtime>,
    #[serde(default)]
    pub reconcile: Option<Reconcile>,
    #[serde(default)]
    pub emit: Option<Emit>,
}

/// `observe`: what besides the primary CRs can trigger a reconcile.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Observe {
    /// Reads of other CRDs' CRs into `.cross.<as>`.
    #[serde(default)]
    pub cross: Vec<CrossSpec>,
    /// Secondary kinds whose changes enqueue primary CRs.
    #[serde(default)]
    pub watch: Vec<Watch>,
    /// Kubernetes Events that enqueue primary CRs, keyed by a camelCase name.
    #[serde(default)]
    pub events: BTreeMap<String, EventWatch>,
}

/// Which events of a watched kind count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum EventType {
    Create,
    Update,
    Delete,
}

/// `observe.watch[]`.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Watch {
    pub api_version: String,
    pub kind: String,
    /// Only this namespace (omit: all).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Only this object.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub label_selector: BTreeMap<String, String>,
    /// Event types that count (default all three).
    #[serde(default)]
    pub on: Vec<EventType>,
    /// Which primary CR to enqueue; default: the owner reference, else every CR.
    #[serde(default)]
    pub key_from: Option<KeyFrom>,
    /// Field indexes on the watch cache.
    #[serde(default)]
    pub index: Vec<Value>,
    /// A gate with sentinels computed on the watched object.
    #[serde(default)]
    pub enqueue_gate: Option<Gate>,
}

/// `keyFrom`: exactly one of `label` and `name`; `namespace` only with `name`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyFrom {
    /// A label on the watched object whose value is `ns/name` or `name` of the primary.
    #[serde(default)]
    pub label: Option<String>,
    /// A fixed primary CR name (templated against the watched object).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `observe.events.<name>`: which Event objects match (all set fields must match).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventWatch {
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub action: Option<String>,
    /// Normal or Warning.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub reporting_controller: Option<String>,
    #[serde(default)]
    pub reporting_instance: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub regarding: Option<ObjectMatch>,
    #[serde(default)]
    pub related: Option<ObjectMatch>,
    #[serde(default)]
    pub on: Vec<EventType>,
    #[serde(default)]
    pub key_from: Option<KeyFrom>,
    #[serde(default)]
    pub enqueue_gate: Option<Gate>,
}

/// Match on an object reference of an Event.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMatch {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `observe.cross[]`: a read of another CRD's CR.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CrossSpec {
    /// The CRD (Katalog key) to read; or `labelSelector`.
    #[serde(default)]
    pub crd: Option<String>,
    #[serde(default)]
    pub label_selector: BTreeMap<String, String>,
    /// Or the CRD by its kind (`apiTypes.kind`), when one CRD of the Katalog has it.
    #[serde(default)]
    pub kind: Option<String>,
    /// Which CR: `{name, namespace}` (templated) or `{matchLabels}`.
    #[serde(default)]
    pub selector: Option<Value>,
    /// The key under `.cross` (default: the CRD name).
    #[serde(default, rename = "as")]
    pub as_: Option<String>,
    /// `first` (the only strategy implemented).
    #[serde(default)]
    pub strategy: Option<String>,
    /// Read from another runtime over HTTP instead of this process.
    #[serde(default)]
    pub source: Option<CrossSource>,
}

/// `cross.source`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CrossSource {
    #[serde(default)]
    pub host: Option<String>,
    /// cr, health, metrics, info or events (default cr).
    #[serde(default)]
    pub protocol: Option<String>,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub cache_for: Option<String>,
    #[serde(default)]
    pub auth: Option<Value>,
}

/// What a gate does when an external call it depends on fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FailPolicy {
    /// Pass (the default).
    #[default]
    Open,
    /// Block.
    Closed,
}

/// `preReconcile`: the two admission gates.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreReconcile {
    /// Calls shared by both gates, run first.
    #[serde(default)]
    pub external: Vec<ExternalCall>,
    /// The sentinels computed for this CRD's update events (declare before use).
    #[serde(default)]
    pub sentinels: Vec<String>,
    /// Evaluated before an event enters the queue; failing drops the event.
    #[serde(default)]
    pub enqueue_gate: Option<Gate>,
    /// Evaluated after dequeue; failing skips the reconcile and marks the CRD gated.
    #[serde(default)]
    pub reconcile_gate: Option<Gate>,
}

/// An enqueue or reconcile gate.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gate {
    #[serde(default)]
    pub external: Vec<ExternalCall>,
    /// Shorthand: pass when any of these (declared) sentinels is true.
    #[serde(default)]
    pub sentinels: Vec<String>,
    /// Keep every admitted event as its own queue item (reconcileGate).
    #[serde(default)]
    pub event_aware: bool,
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
    #[serde(default)]
    pub fail_policy: Option<FailPolicy>,
}

/// `runtime`: lifecycle settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Runtime {
    #[serde(default)]
    pub finalizers: Vec<String>,
    /// Strip Orkestra's finalizers instead of adding them (testing).
    #[serde(default)]
    pub remove_finalizers: bool,
    #[serde(default)]
    pub deletion_protection: Option<Value>,
    #[serde(default)]
    pub restricted_namespaces: Vec<String>,
    #[serde(default)]
    pub allowed_namespaces: Vec<String>,
    #[serde(default)]
    pub ignore_status_patch: bool,
    /// `false`: no health and metrics stamps on the CRs but those the Katalog reads.
    #[serde(default)]
    pub stamps: Option<bool>,
    #[serde(default)]
    pub ignore_observed_generation: bool,
    #[serde(default)]
    pub autoscale: Option<Autoscale>,
    /// In development upstream; accepted.
    #[serde(default)]
    pub rollback: Option<Value>,
    #[serde(default)]
    pub roll_back_on_error: bool,
    #[serde(default)]
    pub cleanup: Option<Value>,
}

/// `runtime.autoscale`: the operator autoscaler.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Autoscale {
    /// A preset that stands for the whole block (`burst`); expanded at load.
    #[serde(default)]
    pub profile: Option<String>,
    /// Evaluation tick (default 15s).
    #[serde(default)]
    pub interval: Option<String>,
    /// How long conditions must stay false before the baseline returns (default 2m).
    #[serde(default)]
    pub cooldown: Option<String>,
    #[serde(default)]
    pub conditions: ConditionsSpec,
    #[serde(rename = "do", default)]
    pub do_: AutoscaleDo,
}

/// `autoscale.do`: the overrides applied while the conditions hold.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoscaleDo {
    #[serde(default)]
    pub workers: Option<u32>,
    #[serde(default)]
    pub queue_depth: Option<u32>,
    #[serde(default)]
    pub resync: Option<String>,
}

/// `reconcile`: which reconciler runs, how it is tuned, and the declarative templates.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reconcile {
    /// `true` (default): the declarative reconciler; `false`: a constructor owns reconcile.
    #[serde(default)]
    pub default: Option<bool>,
    #[serde(default)]
    pub hooks: Option<HooksSpec>,
    #[serde(default)]
    pub constructor: Option<ConstructorSpec>,
    /// Remote (HTTP) reconciler; accepted, not hosted by this runtime.
    #[serde(default)]
    pub remote: Option<Value>,
    /// Named tuning preset (high-throughput, conservative, development, or a user profile).
    #[serde(default)]
    pub profile: Option<String>,
    /// Concurrent reconciles (1..50).
    #[serde(default)]
    pub workers: Option<i64>,
    /// Full re-list interval.
    #[serde(default)]
    pub resync: Option<String>,
    #[serde(default)]
    pub queue: Queue,
    #[serde(default)]
    pub requeue: Option<Requeue>,
    /// In-memory rewrites of spec values before everything else (`{spec: {path: template}}`).
    #[serde(default)]
    pub normalize: Option<Normalize>,
    /// Motif imports merged into onReconcile.
    #[serde(default)]
    pub imports: Vec<Import>,
    /// Server-side apply with force (default true).
    #[serde(default)]
    pub force_conflict: Option<bool>,
    #[serde(default)]
    pub providers: Option<Value>,
    #[serde(default)]
    pub on_create: Option<HookTemplates>,
    #[serde(default)]
    pub on_reconcile: Option<HookTemplates>,
    #[serde(default)]
    pub on_delete: Option<HookTemplates>,
}

/// `reconcile.queue`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Queue {
    #[serde(default)]
    pub shared: bool,
    /// Reference depth for `behaviour` (0: unlimited).
    #[serde(default)]
    pub max_depth: u32,
    /// When the CRD is degraded: after this many failures in a row (default 5), or, written
    /// as a fraction, once that share of its recent reconciles failed.
    #[serde(default)]
    pub failure_threshold: Option<FailureThreshold>,
    #[serde(default)]
    pub retry_backoff: Option<RetryBackoff>,
    #[serde(default)]
    pub behaviour: Option<Behaviour>,
    /// How CRs share the workers: grouped into flows served in turn.
    #[serde(default)]
    pub fairness: Option<Fairness>,
    /// Users' changes before background work, which ages.
    #[serde(default)]
    pub priority: Option<QueuePriority>,
}

/// `queue.fairness`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fairness {
    /// `namespace` (default), `label:<key>` or `none` (one flow: first in, first out).
    #[serde(default)]
    pub by: Option<String>,
    /// Items a flow is served per turn (default 1), by flow name (a namespace, or the
    /// label's value).
    #[serde(default)]
    pub weights: std::collections::BTreeMap<String, u32>,
}

/// `queue.priority`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueuePriority {
    /// How much longer than a user's change background work may wait (default `10s`);
    /// `0s`: one class, first come first served.
    #[serde(default)]
    pub aging: Option<String>,
}

/// `queue.behaviour`: what to do when the queue fills.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Behaviour {
    #[serde(default)]
    pub on_limit: Option<OnLimit>,
    #[serde(default)]
    pub on_threshold: Option<OnThreshold>,
}

/// At depth >= maxDepth.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OnLimit {
    #[serde(default)]
    pub drop: bool,
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
}

/// At `value`% of maxDepth.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OnThreshold {
    pub value: u32,
    #[serde(default)]
    pub drop: Option<bool>,
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
}

/// `reconcile.requeue`: re-enqueue after a successful reconcile.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Requeue {
    /// A templated duration; empty or `0s` means none.
    #[serde(default)]
    pub after: Option<String>,
    /// The shortest delay of any requeue of this box, a component's included (default `1s`):
    /// a CR that asks to run again at once cannot hold a worker.
    #[serde(default)]
    pub min_interval: Option<String>,
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
}

/// The shortest requeue when the Katalog does not say (`reconcile.requeue.minInterval`).
pub const DEFAULT_REQUEUE_FLOOR: std::time::Duration = std::time::Duration::from_secs(1);

impl Requeue {
    /// `minInterval`, checked; the default when absent. Errors name the field.
    pub fn floor(&self) -> Result<std::time::Duration, crate::error::Error> {
        let Some(text) = self.min_interval.as_deref() else {
            return Ok(DEFAULT_REQUEUE_FLOOR);
        };
        match orkestra_expr::duration::parse(text) {
            Ok(floor) if !floor.is_zero() => Ok(floor),
            Ok(_) => Err(crate::error::Error::Field(format!(
                "requeue.minInterval: {text:?} must be above 0"
            ))),
            Err(e) => Err(crate::error::Error::Field(format!("requeue.minInterval: {e}"))),
        }
    }
}

/// `emit`: what the reconciler reports.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Emit {
    #[serde(default)]
    pub status: Option<StatusSpec>,
    /// Kubernetes Events emitted after reconcile, by name.
    #[serde(default)]
    pub events: BTreeMap<String, EmitEvent>,
}

/// `emit.status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusSpec {
    /// Write the Ready/Validation conditions and observedGeneration (default true).
    #[serde(default)]
    pub conditions: Option<bool>,
    /// Ordered; a later entry wins on the same path.
    #[serde(default)]
    pub fields: Vec<StatusField>,
}

/// One status field.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusField {
    /// Relative to `.status`; dots make nested maps.
    pub path: String,
    /// A template.
    #[serde(default)]
    pub value: String,
    /// string (default), int, float, bool or auto.
    #[serde(default, rename = "type")]
    pub type_: Option<ValueType>,
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
    /// Write "" when the conditions are false.
    #[serde(default)]
    pub clear_on_false: bool,
}

/// `emit.events.<name>`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmitEvent {
    /// Normal (default) or Warning.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    /// always (default), success or failure.
    #[serde(default)]
    pub on: Vec<String>,
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
}

/// `queue.failureThreshold`: a count of failures in a row, or a share of recent reconciles.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum FailureThreshold {
    InARow(u32),
    /// In (0, 1): the share of the last reconciles (a window of 20) that failed.
    Rate(f64),
}

impl<'de> Deserialize<'de> for FailureThreshold {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = FailureThreshold;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a count of failures in a row (1 or more) or a failure rate between 0 and 1")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FailureThreshold, E> {
                match u32::try_from(v) {
                    Ok(n) if n >= 1 => Ok(FailureThreshold::InARow(n)),
                    _ => Err(E::custom(format!(
                        "failureThreshold {v}: give 1 or more failures in a row, or a rate between 0 and 1"
                    ))),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<FailureThreshold, E> {
                self.visit_u64(u64::try_from(v).unwrap_or(0))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<FailureThreshold, E> {
                if v > 0.0 && v < 1.0 {
                    Ok(FailureThreshold::Rate(v))
                } else if v >= 1.0 && v.fract() == 0.0 && v <= f64::from(u32::MAX) {
                    Ok(FailureThreshold::InARow(v as u32))
                } else {
                    Err(E::custom(format!(
                        "failureThreshold {v}: give 1 or more failures in a row, or a rate between 0 and 1"
                    )))
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// `reconcile.normalize`: spec fields rewritten in memory before reconcile (not run yet).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Normalize {
    /// Record what normalization changed.
    #[serde(default)]
    pub audit: bool,
    /// `{spec: {path: template}}`.
    #[serde(flatten)]
    pub sections: BTreeMap<String, BTreeMap<String, String>>,
}
