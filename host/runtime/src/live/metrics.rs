//! `/metrics`: the runtime in the Prometheus exposition format (OpenMetrics text, through
//! `prometheus-client`). Names follow controller-runtime and client-go's workqueue so their
//! dashboards work unchanged (`controller` and `name` are the CRD's Katalog key), then
//! upstream Orkestra's where they differ, then ours: failures by reason, dropped triggers,
//! health, and the Wasm components (`component` is the slot name).
//!
//! Every label value comes from the Katalog (CRD and component names), from a fixed set
//! (results, reasons, outcomes), or is a flow's or a tenant's name (a namespace, or the
//! value of the label `queue.fairness` names), for a bounded number of the busiest: nothing
//! else a CR or a guest writes becomes a label. Figures the
//! runtime keeps anyway (queue depth, workers, counts) are read at scrape time; only the
//! histograms are recorded as work happens.

use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeCounterValue, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::outcome::counters::{CHANGE_CLASSES, Timing};
use crate::outcome::health::State;
use crate::pipeline::flows::FlowView;
use crate::pipeline::roster::CrdHandle;
use crate::runtime::Inspect;
use orkestra_wasm::{CallOutcome, Phase, Retired};

/// The exposition's content type.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric of the runtime of `inspect`, read at each scrape.
#[derive(Debug)]
struct RuntimeCollector(Inspect);

impl std::fmt::Debug for Inspect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspect")
            .field("crds", &self.crds().len())
            .finish_non_exhaustive()
    }
}

/// One metric family: its name, help, type and a value per label set.
struct Family<'a, 'e> {
    encoder: &'a mut DescriptorEncoder<'e>,
}

impl<'e> Family<'_, 'e> {
    fn gauges<'l>(
        &mut self,
        name: &str,
        help: &str,
        values: impl IntoIterator<Item = (Vec<(&'l str, &'l str)>, f64)>,
    ) -> std::fmt::Result {
        let mut metric = self.encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (labels, value) in values {
            ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }

    fn counters<'l, N: EncodeCounterValue>(
        &mut self,
        name: &str,
        help: &str,
        values: impl IntoIterator<Item = (Vec<(&'l str, &'l str)>, N)>,
    ) -> std::fmt::Result {
        let mut metric = self.encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (labels, value) in values {
            ConstCounter::new(value).encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }

    fn histograms<'l>(
        &mut self,
        name: &str,
        help: &str,
        values: impl IntoIterator<Item = (Vec<(&'l str, &'l str)>, &'l Histogram)>,
    ) -> std::fmt::Result {
        let mut metric = self.encoder.encode_descriptor(
            name,
            help,
            Some(&prometheus_client::registry::Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (labels, histogram) in values {
            histogram.encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

const RESULTS: [&str; 4] = ["success", "error", "requeue", "requeue_after"];

/// The one label of a CRD's series.
fn by<'h>(label: &'static str, handle: &'h CrdHandle) -> Vec<(&'static str, &'h str)> {
    vec![(label, &*handle.crd.name)]
}

impl Collector for RuntimeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let inspect = &self.0;
        let crds = &inspect.crds();
        let health = inspect.health.all();
        let mut family = Family { encoder: &mut encoder };
        let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);

        // controller-runtime.
        let controller = |h| by("controller", h);
        family.counters(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            crds.iter().flat_map(|h| {
                let r = &h.counters.results;
                let values = [
                    load(&r.success),
                    load(&r.error),
                    load(&r.requeue),
                    load(&r.requeue_after),
                ];
                RESULTS
                    .iter()
                    .zip(values)
                    .map(move |(result, value)| (vec![("controller", &*h.crd.name), ("result", *result)], value))
            }),
        )?;
        family.counters(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            crds.iter().map(|h| (controller(h), load(&h.counters.failures))),
        )?;
        family.histograms(
            "controller_runtime_reconcile_time",
            "Length of time per reconciliation per controller",
            crds.iter().map(|h| (controller(h), &h.counters.timing.reconcile)),
        )?;
        family.gauges(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            crds.iter().map(|h| (controller(h), h.queue.running() as f64)),
        )?;
        family.gauges(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            crds.iter().map(|h| (controller(h), h.tuning.workers() as f64)),
        )?;

        // client-go's workqueue.
        let queue = |h| by("name", h);
        family.gauges(
            "workqueue_depth",
            "Current depth of workqueue",
            crds.iter().map(|h| (queue(h), h.queue.depth() as f64)),
        )?;
        family.counters(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            crds.iter().map(|h| (queue(h), h.queue.throughput().adds)),
        )?;
        family.counters(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            crds.iter().map(|h| (queue(h), h.queue.throughput().retries)),
        )?;
        family.histograms(
            "workqueue_queue_duration",
            "How long an item stays in workqueue before being requested",
            crds.iter().map(|h| (queue(h), &h.counters.timing.queued)),
        )?;
        family.histograms(
            "workqueue_work_duration",
            "How long processing an item from workqueue takes",
            crds.iter().map(|h| (queue(h), &h.counters.timing.work)),
        )?;
        // The two latencies of a change, by class: a user's change, or background work.
        let by_class = |pick: fn(&Timing) -> &[Histogram; 2]| {
            crds.iter().flat_map(move |h| {
                CHANGE_CLASSES
                    .iter()
                    .zip(pick(&h.counters.timing))
                    .map(move |(class, histogram)| (vec![("controller", &*h.crd.name), ("class", *class)], histogram))
            })
        };
        family.histograms(
            "orkestra_queue_latency",
            "From a change's watch event to the start of its reconcile, by class (user: a new CR, a new generation, labels, annotations, a deletion, a watched child; background: the initial list, resyncs)",
            by_class(|t| &t.change_queued),
        )?;
        family.histograms(
            "orkestra_reconcile_latency",
            "From a change's watch event to the end of the reconcile that handled it, its status written (retries included), by class",
            by_class(|t| &t.change_done),
        )?;

        // The flows of each queue (`queue.fairness`): the busiest, then the most recently served.
        let flows: Vec<(&CrdHandle, Vec<FlowView>)> = crds
            .iter()
            .map(|h| (h, h.queue.flows(super::katalog::FLOWS_SHOWN)))
            .collect();
        let each_flow = || {
            flows
                .iter()
                .flat_map(|(h, views)| views.iter().map(move |v| (&*h.crd.name, v)))
        };
        family.gauges(
            "orkestra_queue_flow_depth",
            "Items queued in a flow of a CRD's queue (its busiest flows), by class: user changes and background work",
            each_flow().flat_map(|(crd, v)| {
                [("user", v.user), ("background", v.background)].map(|(class, n)| {
                    (
                        vec![("controller", crd), ("flow", &*v.flow), ("class", class)],
                        n as f64,
                    )
                })
            }),
        )?;
        family.counters(
            "orkestra_queue_flow_served",
            "Items served from a flow of a CRD's queue",
            each_flow().map(|(crd, v)| (vec![("controller", crd), ("flow", &*v.flow)], v.stats.served)),
        )?;
        family.gauges(
            "orkestra_queue_flow_wait_seconds",
            "How long a flow's recently served items waited once ready (quantile 0.5 and 0.99 of the last 128)",
            each_flow().flat_map(|(crd, v)| {
                [("0.5", v.stats.wait(50)), ("0.99", v.stats.wait(99))]
                    .into_iter()
                    .filter_map(move |(quantile, wait)| {
                        let labels = vec![("controller", crd), ("flow", &*v.flow), ("quantile", quantile)];
                        Some((labels, wait?.as_secs_f64()))
                    })
            }),
        )?;

        // Upstream Orkestra's names.
        let crd = |h| by("crd", h);
        family.counters(
            "controller_reconcile",
            "Reconciles per CRD by result (upstream Orkestra's name)",
            crds.iter().flat_map(|h| {
                let (all, failed) = (load(&h.counters.reconciles), load(&h.counters.failures));
                [("success", all.saturating_sub(failed)), ("error", failed)]
                    .into_iter()
                    .map(move |(result, value)| (vec![("crd", &*h.crd.name), ("result", result)], value))
            }),
        )?;
        family.histograms(
            "controller_reconcile_duration",
            "Reconcile durations per CRD (upstream Orkestra's name)",
            crds.iter().map(|h| (crd(h), &h.counters.timing.reconcile)),
        )?;
        family.gauges(
            "controller_resource_count",
            "Custom resources in the CRD's informer cache",
            crds.iter().map(|h| (crd(h), h.cache.len() as f64)),
        )?;
        family.gauges(
            "controller_queue_depth",
            "Work queue depth per CRD (upstream Orkestra's name)",
            crds.iter().map(|h| (crd(h), h.queue.depth() as f64)),
        )?;
        family.gauges(
            "controller_workers_active",
            "Workers running a reconcile per CRD (upstream Orkestra's name)",
            crds.iter().map(|h| (crd(h), h.queue.running() as f64)),
        )?;

        // Ours.
        family.counters(
            "orkestra_reconcile_failures",
            "Failed reconciles by reason (a fixed set: a component's own reason counts as ComponentFailed)",
            // Only the reasons met so far; each is one of a fixed set.
            crds.iter().flat_map(|h| {
                h.counters
                    .failures_by_reason()
                    .into_iter()
                    .map(move |(reason, value)| (vec![("controller", &*h.crd.name), ("reason", reason)], value))
            }),
        )?;
        family.counters(
            "orkestra_enqueue_dropped",
            "Triggers dropped before the queue, by where",
            crds.iter().flat_map(|h| {
                let s = &h.stats;
                [
                    ("namespace", load(&s.dropped_namespace)),
                    ("threshold", load(&s.dropped_threshold)),
                    ("limit", load(&s.dropped_limit)),
                    ("enqueue_gate", load(&s.dropped_gate)),
                ]
                .into_iter()
                .map(move |(stage, value)| (vec![("controller", &*h.crd.name), ("stage", stage)], value))
            }),
        )?;
        family.counters(
            "orkestra_writes",
            "Writes reconcilers made to the API server",
            crds.iter().map(|h| (controller(h), load(&h.counters.writes))),
        )?;
        family.counters(
            "orkestra_write_budget_held",
            "Reconciles held back because their CR had spent its write budget",
            crds.iter().map(|h| (controller(h), load(&h.counters.held))),
        )?;
        family.counters(
            "orkestra_gated",
            "Items the reconcile gate held back",
            crds.iter().map(|h| (controller(h), load(&h.counters.gated))),
        )?;
        family.gauges(
            "orkestra_crd_health",
            "1 for the state the CRD is in (pending, started, healthy, degraded, gated)",
            crds.iter().flat_map(|h| {
                let now = health.get(&*h.crd.name).map(|h| h.state);
                State::ALL.iter().map(move |state| {
                    (
                        vec![("controller", &*h.crd.name), ("state", state.label())],
                        f64::from(u8::from(now == Some(*state))),
                    )
                })
            }),
        )?;
        // Each permission the last check found missing; `controller` is empty for the
        // runtime's own needs. Every label value comes from the Katalog.
        let missing = inspect.permissions.all();
        let missing: Vec<(&str, &orkestra_katalog::rbac::Need, String)> = missing
            .iter()
            .flat_map(|(crd, needs)| needs.iter().map(move |n| (crd.as_str(), n, n.qualified_resource())))
            .collect();
        family.gauges(
            "orkestra_permission_missing",
            "1 for each permission the Katalog needs that the runtime lacks (SelfSubjectAccessReview at load, after reloads, every 5 minutes)",
            missing.iter().map(|(crd, need, resource)| {
                let labels = vec![
                    ("controller", *crd),
                    ("verb", need.verb),
                    ("resource", resource.as_str()),
                    ("namespace", need.namespace().unwrap_or("")),
                    ("name", need.name.as_deref().unwrap_or("")),
                ];
                (labels, 1.0)
            }),
        )?;

        // Wasm components.
        let slots = inspect.components.slots();
        let host = inspect.components.host();
        family.counters(
            "orkestra_wasm_calls",
            "Calls into each component by outcome",
            slots.iter().flat_map(|slot| {
                CallOutcome::ALL.iter().map(move |outcome| {
                    (
                        vec![("component", &*slot.name), ("outcome", outcome.label())],
                        slot.stats.count(*outcome),
                    )
                })
            }),
        )?;
        family.histograms(
            "orkestra_wasm_call_duration",
            "Duration of each call into a component",
            slots
                .iter()
                .map(|slot| (vec![("component", &*slot.name)], &slot.stats.durations)),
        )?;
        family.histograms(
            "orkestra_wasm_call_phase_duration",
            "Time of each phase of the calls into a component that got an instance (instantiate, run, teardown)",
            slots.iter().flat_map(|slot| {
                Phase::ALL.iter().map(move |phase| {
                    (
                        vec![("component", &*slot.name), ("phase", phase.label())],
                        slot.stats.phase_durations(*phase),
                    )
                })
            }),
        )?;
        family.counters(
            "orkestra_wasm_traps",
            "Calls the host stopped, by reason",
            slots.iter().flat_map(|slot| {
                CallOutcome::ALL.iter().filter(|o| o.is_trap()).map(move |outcome| {
                    (
                        vec![("component", &*slot.name), ("reason", outcome.label())],
                        slot.stats.count(*outcome),
                    )
                })
            }),
        )?;
        family.counters(
            "orkestra_wasm_interruptions",
            "Calls interrupted by the epoch deadline (the component ran past its timeout)",
            slots.iter().map(|slot| {
                (
                    vec![("component", &*slot.name), ("kind", "epoch")],
                    slot.stats.count(CallOutcome::Timeout),
                )
            }),
        )?;
        family.counters(
            "orkestra_wasm_denials",
            "Calls in which a kube call or a child was refused by the component's grants",
            slots.iter().map(|slot| {
                (
                    vec![("component", &*slot.name), ("reason", "grant")],
                    slot.stats.denials(),
                )
            }),
        )?;
        family.counters(
            "orkestra_wasm_instances",
            "Calls into a component by how they got their instance: a new one, or a warm one kept from an earlier call (instances.reuse: warm)",
            slots.iter().flat_map(|slot| {
                let (fresh, reused) = slot.stats.instances();
                [("fresh", fresh), ("reused", reused)]
                    .map(|(how, calls)| (vec![("component", &*slot.name), ("instance", how)], calls))
            }),
        )?;
        family.counters(
            "orkestra_wasm_warm_retired",
            "Warm instances given up after a call, by reason (max_calls, memory_high_water, failed_call)",
            slots.iter().flat_map(|slot| {
                Retired::ALL.iter().map(move |why| {
                    (
                        vec![("component", &*slot.name), ("reason", why.label())],
                        slot.stats.retirements(*why),
                    )
                })
            }),
        )?;
        family.gauges(
            "orkestra_wasm_warm_idle",
            "Warm instances kept between calls, all components together",
            host.as_ref().map(|host| (Vec::new(), host.warm_idle() as f64)),
        )?;
        family.gauges(
            "orkestra_wasm_memory_high_water_bytes",
            "The most memory and table bytes one instance of the component held",
            slots
                .iter()
                .map(|slot| (vec![("component", &*slot.name)], slot.stats.memory_high_water() as f64)),
        )?;
        // Tenants: what the busiest namespaces take of the whole runtime.
        let tenants = &inspect.tenants;
        let reconciling = tenants.reconciling();
        family.gauges(
            "orkestra_tenant_reconciles",
            "Reconciles of a namespace running now, over every CRD (spec.tenants.reconciles caps it)",
            reconciling
                .iter()
                .map(|(namespace, running)| (vec![("namespace", &**namespace)], *running as f64)),
        )?;
        let api_waits = tenants.api_waits();
        family.counters(
            "orkestra_tenant_api_waits",
            "API requests of a namespace that waited for its rate (spec.tenants.api)",
            api_waits
                .iter()
                .map(|(namespace, waited)| (vec![("namespace", namespace.as_str())], waited.requests)),
        )?;
        family.counters(
            "orkestra_tenant_api_wait_seconds",
            "How long a namespace's API requests waited for its rate, in all",
            api_waits
                .iter()
                .map(|(namespace, waited)| (vec![("namespace", namespace.as_str())], waited.seconds)),
        )?;
        let wasm_calls = host.as_ref().map(|host| host.tenant_calls()).unwrap_or_default();
        family.gauges(
            "orkestra_tenant_wasm_calls",
            "Wasm calls of a namespace running now (spec.tenants.wasmCalls caps it)",
            wasm_calls
                .iter()
                .map(|(namespace, running)| (vec![("namespace", namespace.as_str())], *running as f64)),
        )?;
        let cpu = host.as_ref().map(|host| host.tenant_cpu()).unwrap_or_default();
        family.counters(
            "orkestra_tenant_wasm_cpu_seconds",
            "CPU a namespace's guest code used (spec.tenants.wasmCpu holds it to a rate)",
            cpu.iter()
                .take(crate::live::tenants::TENANTS_SHOWN)
                .map(|(tenant, used)| (vec![("namespace", tenant.as_str())], used.used)),
        )?;
        family.counters(
            "orkestra_tenant_wasm_cpu_wait_seconds",
            "How long a namespace's calls waited for its share of CPU",
            cpu.iter()
                .take(crate::live::tenants::TENANTS_SHOWN)
                .map(|(tenant, used)| (vec![("namespace", tenant.as_str())], used.waited)),
        )?;
        if let Some(pool) = host.as_ref().map(|host| host.pool()) {
            family.gauges(
                "orkestra_wasm_pool_used",
                "What the Wasm engine's instance pool holds now, by part (instances, core instances, memories, tables)",
                pool.used
                    .parts()
                    .into_iter()
                    .map(|(part, n)| (vec![("part", part)], f64::from(n))),
            )?;
            family.gauges(
                "orkestra_wasm_pool_size",
                "The Wasm engine's instance pool, by part",
                pool.total
                    .parts()
                    .into_iter()
                    .map(|(part, n)| (vec![("part", part)], f64::from(n))),
            )?;
            family.gauges(
                "orkestra_tenant_wasm_pool",
                "What a tenant's calls and kept instances hold of the Wasm engine's pool, by part (its share: the pool times wasmCalls/64)",
                pool.tenants.iter().take(crate::live::tenants::TENANTS_SHOWN).flat_map(|t| {
                    t.held
                        .parts()
                        .into_iter()
                        .map(move |(part, n)| (vec![("namespace", t.tenant.as_str()), ("part", part)], f64::from(n)))
                }),
            )?;
        }
        family.gauges(
            "orkestra_wasm_revision",
            "The revision serving for each component (0: none loaded)",
            slots.iter().map(|slot| {
                (
                    vec![("component", &*slot.name)],
                    slot.active().map_or(0, |a| a.revision) as f64,
                )
            }),
        )?;
        Ok(())
    }
}

/// The registry of one runtime.
pub fn registry(inspect: Inspect) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(RuntimeCollector(inspect)));
    registry
}

/// The exposition text.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}
