//! `spec.tenants` compiled: what one namespace may take of the whole runtime, over every CRD
//! (reconciles at once, API requests, Wasm calls at once), with the defaults filled in.

use std::collections::BTreeMap;

use super::{CompiledCrd, Error};
use crate::model::{ApiRateSpec, TenantLimitsSpec, TenantsSpec};

/// Wasm calls at once of one namespace when the Katalog does not say: a quarter of the
/// host's.
pub const DEFAULT_WASM_CALLS: usize = 16;
/// Cores of guest CPU one namespace's calls may use when the Katalog does not say: half of
/// one, so a tenant whose guests compute without end leaves the rest of the machine to the
/// others.
pub const DEFAULT_WASM_CPU: f64 = 0.5;
const WASM_CPU_RANGE: std::ops::RangeInclusive<f64> = 0.01..=256.0;
/// The Wasm host's calls at once (`orkestra_wasm::MAX_CONCURRENT_CALLS`; a runtime test
/// holds the two equal): no namespace can be given more.
pub const WASM_CALLS_MAX: usize = 64;
const RECONCILES_MAX: u32 = 10_000;
const QPS_MAX: f64 = 100_000.0;
const NAMESPACES_MAX: usize = 1000;

/// A token bucket: `qps` a second, up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApiRate {
    pub qps: f64,
    pub burst: f64,
}

/// What one namespace may take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TenantLimits {
    /// Reconciles at once, over every CRD.
    pub reconciles: usize,
    /// API requests; `None`: not limited.
    pub api: Option<ApiRate>,
    /// Wasm calls at once.
    pub wasm_calls: usize,
    /// Cores of guest CPU its calls may use, on average over a second.
    pub wasm_cpu: f64,
}

/// The limits of every namespace: the defaults, and those of the namespaces named.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantRules {
    pub default: TenantLimits,
    pub namespaces: BTreeMap<String, TenantLimits>,
}

/// The rules of a Katalog without `spec.tenants` whose widest CRD runs one worker.
impl Default for TenantRules {
    fn default() -> Self {
        Self {
            default: TenantLimits {
                reconciles: 1,
                api: None,
                wasm_calls: DEFAULT_WASM_CALLS,
                wasm_cpu: DEFAULT_WASM_CPU,
            },
            namespaces: BTreeMap::new(),
        }
    }
}

impl TenantRules {
    /// The rules of `spec` for a runtime of `crds`; each error goes to `errors`, naming its
    /// field under `spec.tenants` (and its part keeps the default).
    pub(crate) fn compile<'c>(
        spec: Option<&TenantsSpec>,
        crds: impl IntoIterator<Item = &'c CompiledCrd>,
        errors: &mut super::Gather,
    ) -> Self {
        // One namespace may fill the largest CRD's workers, not every CRD's: with one CRD
        // this never binds (its flows share it), with several it leaves the others room.
        let widest = crds.into_iter().map(CompiledCrd::most_workers).max().unwrap_or(1);
        let base = TenantLimits {
            reconciles: widest.max(1),
            ..Self::default().default
        };
        let empty = TenantsSpec::default();
        let spec = spec.unwrap_or(&empty);
        let given = TenantLimitsSpec {
            reconciles: spec.reconciles,
            api: spec.api,
            wasm_calls: spec.wasm_calls,
            wasm_cpu: spec.wasm_cpu.clone(),
        };
        let default = errors
            .ok(limits(&given, base).map_err(|e| e.within("spec.tenants")))
            .unwrap_or(base);
        if spec.namespaces.len() > NAMESPACES_MAX {
            errors.push(Error::at(
                "spec.tenants.namespaces",
                format!("{} namespaces named; at most {NAMESPACES_MAX}", spec.namespaces.len()),
            ));
        }
        let mut namespaces = BTreeMap::new();
        for (namespace, given) in &spec.namespaces {
            let key = format!("spec.tenants.namespaces.{namespace}");
            if !orkestra_expr::names::is_dns1123_label(namespace) {
                errors.push(Error::at(&key, format!("{namespace:?} is not a namespace name")));
                continue;
            }
            if let Some(limits) = errors.ok(limits(given, default).map_err(|e| e.within(&key))) {
                namespaces.insert(namespace.clone(), limits);
            }
        }
        Self { default, namespaces }
    }

    /// The limits of `namespace`.
    pub fn of(&self, namespace: &str) -> TenantLimits {
        self.namespaces.get(namespace).copied().unwrap_or(self.default)
    }
}

/// `given` over `base`; errors name the field relative to where `given` sits.
fn limits(given: &TenantLimitsSpec, base: TenantLimits) -> Result<TenantLimits, Error> {
    let mut limits = base;
    if let Some(reconciles) = given.reconciles {
        if !(1..=RECONCILES_MAX).contains(&reconciles) {
            return Err(Error::at(
                "reconciles",
                format!("{reconciles} must be between 1 and {RECONCILES_MAX}"),
            ));
        }
        limits.reconciles = reconciles as usize;
    }
    if let Some(calls) = given.wasm_calls {
        if !(1..=WASM_CALLS_MAX as u32).contains(&calls) {
            return Err(Error::at(
                "wasmCalls",
                format!("{calls} must be between 1 and {WASM_CALLS_MAX} (the Wasm host's calls at once)"),
            ));
        }
        limits.wasm_calls = calls as usize;
    }
    if let Some(api) = given.api {
        limits.api = Some(rate(api).map_err(|e| e.within("api"))?);
    }
    if let Some(text) = &given.wasm_cpu {
        let cores = orkestra_expr::template::funcs::quantity::parse(text).map_err(|e| Error::at("wasmCpu", e))?;
        if !WASM_CPU_RANGE.contains(&cores) {
            return Err(Error::at(
                "wasmCpu",
                format!("{text} must be between 10m and 256 cores"),
            ));
        }
        limits.wasm_cpu = cores;
    }
    Ok(limits)
}

fn rate(api: ApiRateSpec) -> Result<ApiRate, Error> {
    if !(api.qps > 0.0 && api.qps <= QPS_MAX) {
        return Err(Error::at(
            "qps",
            format!("{} must be above 0 and at most {QPS_MAX}", api.qps),
        ));
    }
    let burst = match api.burst {
        Some(0) => return Err(Error::at("burst", "must be at least 1")),
        Some(burst) => f64::from(burst),
        None => (api.qps * 2.0).max(1.0),
    };
    if burst > QPS_MAX * 10.0 {
        return Err(Error::at("burst", format!("{burst} is above {}", QPS_MAX * 10.0)));
    }
    Ok(ApiRate { qps: api.qps, burst })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tenant rules of a Katalog with `spec.tenants: <tenants>` and a CRD per entry of
    /// `workers`, or its first error.
    fn rules(tenants: &str, workers: &[usize]) -> Result<TenantRules, String> {
        let crds: String = workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                format!("    c{i}:\n      apiTypes: {{group: a.io, version: v1, kind: K{i}}}\n      operatorBox: {{reconcile: {{workers: {w}}}}}\n")
            })
            .collect();
        let text =
            format!("apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  tenants: {tenants}\n  crds:\n{crds}");
        crate::load::load_sources(&[("k.yaml".into(), text)])
            .map(|compiled| compiled.tenants)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_default_reconcile_cap_is_the_widest_crds_workers_and_namespaces_override_field_by_field() {
        let compiled = rules("{}", &[2, 5, 3]).unwrap();
        assert_eq!(compiled.default.reconciles, 5);
        assert_eq!(compiled.default.api, None);
        assert_eq!(compiled.default.wasm_calls, DEFAULT_WASM_CALLS);
        assert_eq!(compiled.default.wasm_cpu, DEFAULT_WASM_CPU);
        assert_eq!(rules("{wasmCpu: 1500m}", &[1]).unwrap().default.wasm_cpu, 1.5);
        let compiled = rules(
            "{reconciles: 2, api: {qps: 10}, namespaces: {team-a: {wasmCalls: 4}, team-b: {api: {qps: 1, burst: 5}}}}",
            &[4],
        )
        .unwrap();
        assert_eq!(compiled.of("elsewhere").reconciles, 2);
        assert_eq!(compiled.of("elsewhere").api, Some(ApiRate { qps: 10.0, burst: 20.0 }));
        let team_a = compiled.of("team-a");
        assert_eq!(
            (team_a.reconciles, team_a.wasm_calls),
            (2, 4),
            "inherits what it leaves out"
        );
        assert_eq!(compiled.of("team-b").api, Some(ApiRate { qps: 1.0, burst: 5.0 }));
    }

    #[test]
    fn bad_limits_name_their_field() {
        let error = |yaml: &str| rules(yaml, &[1]).unwrap_err();
        for (yaml, wanted) in [
            ("{reconciles: 0}", "spec.tenants.reconciles: 0 must be between 1"),
            ("{wasmCalls: 65}", "spec.tenants.wasmCalls: 65 must be between 1 and 64"),
            (
                "{wasmCpu: 1m}",
                "spec.tenants.wasmCpu: 1m must be between 10m and 256 cores",
            ),
            ("{wasmCpu: lots}", "spec.tenants.wasmCpu: "),
            ("{api: {qps: 0}}", "spec.tenants.api.qps: 0 must be above 0"),
            (
                "{namespaces: {team-a: {api: {qps: 5, burst: 0}}}}",
                "spec.tenants.namespaces.team-a.api.burst: must be at least 1",
            ),
            (
                "{namespaces: {Team_A: {reconciles: 1}}}",
                "\"Team_A\" is not a namespace name",
            ),
            ("{reconcile: 1}", "reconcile"),
        ] {
            let error = error(yaml);
            assert!(error.contains(wanted), "{yaml}: {error}");
        }
    }
}
