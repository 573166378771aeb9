//! The component slots a CRD declares, kept in step with the Katalog: declared at start and
//! again by every reload (a new slot, a changed declaration, a slot no longer declared). The
//! Wasm engine is made with the first component, so a runtime started without any can gain
//! one by a reload.

use crate::error::Error;
use std::path::PathBuf;
use std::sync::Arc;

use orkestra_katalog::compile::CompiledCrd;
use orkestra_wasm::{Components, HostOptions, Registries, Spec, WasmHost};

/// The components a compiled CRD declares, by slot name: `crd` for the CRD's box and
/// `crd/target` for a target whose component differs from it.
pub fn component_specs(crd: &CompiledCrd) -> Vec<(String, Arc<Spec>)> {
    let base = crd.crd_box().component.clone();
    let mut specs: Vec<(String, Arc<Spec>)> = base.iter().map(|spec| (crd.name.to_string(), spec.clone())).collect();
    let mut targets: Vec<_> = crd.targets.iter().collect();
    targets.sort_by(|a, b| a.0.cmp(b.0));
    for (target, compiled) in targets {
        if let Some(spec) = &compiled.component
            && base.as_ref() != Some(spec)
        {
            specs.push((format!("{}/{target}", crd.name), spec.clone()));
        }
    }
    specs
}

/// The slot names a CRD declares: a CRD whose names change runs other reconcilers, so it
/// restarts even when its pipeline is otherwise the same.
pub fn slot_names(crd: &CompiledCrd) -> Vec<String> {
    component_specs(crd).into_iter().map(|(name, _)| name).collect()
}

/// Whether the slot `slot` belongs to the CRD `crd` (`crd`, or `crd/target`).
pub fn belongs(slot: &str, crd: &str) -> bool {
    slot.split('/').next() == Some(crd)
}

/// The runtime's slots and the engine they run on.
pub struct Declared {
    pub components: Components,
    host: Option<Arc<WasmHost>>,
    /// Fuel metering is engine-wide and fixed when the engine is made.
    fuel: bool,
    cluster: kube::Client,
    http: reqwest::Client,
    store: ComponentStore,
    /// The cache folder made when the store names none, removed with the runtime.
    scratch: Option<tempfile::TempDir>,
    /// Each namespace's share of the Wasm host.
    tenants: Arc<crate::tenants::Tenants>,
}

/// Where components come from and where their compiled artifacts are kept.
#[derive(Debug, Default)]
pub struct ComponentStore {
    /// Credentials and plain-HTTP registries for `oci://` components.
    pub registries: Registries,
    /// The compiled-artifact cache; without one, a private folder that lives as long as the
    /// runtime (every start compiles again).
    pub cache_dir: Option<PathBuf>,
    /// Where recordings of component calls may be written (`--recordings`); without it the
    /// runtime records nothing.
    pub recordings: Option<orkestra_wasm::record::Folder>,
}

impl Declared {
    pub fn new(
        cluster: kube::Client,
        http: reqwest::Client,
        store: ComponentStore,
        tenants: Arc<crate::tenants::Tenants>,
    ) -> Self {
        Self {
            components: Components::default(),
            host: None,
            fuel: false,
            cluster,
            http,
            store,
            scratch: None,
            tenants,
        }
    }

    /// Hands the tenants' rules, changed, to the Wasm host.
    pub fn tenants_changed(&self) {
        if let Some(host) = &self.host {
            host.set_tenant_rules((*self.tenants.rules()).clone());
        }
    }

    /// Declares the slots of `crds` (each new or changed slot is returned, to be loaded);
    /// `fuel` makes an engine made now meter fuel.
    pub fn declare_all<'c>(
        &mut self,
        crds: impl IntoIterator<Item = &'c Arc<CompiledCrd>>,
        fuel: bool,
    ) -> Result<Vec<String>, Error> {
        let mut loads = Vec::new();
        for crd in crds {
            loads.extend(self.declare(crd, fuel)?);
        }
        Ok(loads)
    }

    /// Declares `crd`'s slots and drops those it no longer declares; returns the slots new or
    /// changed. Nothing changes when one of them cannot be hosted.
    pub fn declare(&mut self, crd: &CompiledCrd, fuel: bool) -> Result<Vec<String>, Error> {
        let specs = component_specs(crd);
        let added = specs.iter().any(|(name, _)| self.components.get(name).is_none());
        let host = match added {
            true => Some(self.host(fuel)?),
            false => None,
        };
        if !self.fuel && specs.iter().any(|(_, spec)| spec.limits.fuel.is_some()) {
            return Err(Error::Wasm(
                "its component sets a fuel limit, and this runtime's Wasm engine was made without fuel metering (no component had one at start): restart to apply it"
                    .into(),
            ));
        }
        for slot in self.components.slots() {
            if belongs(&slot.name, &crd.name) && !specs.iter().any(|(name, _)| *name == *slot.name) {
                self.components.remove(&slot.name);
            }
        }
        let mut loads = Vec::new();
        for (name, spec) in specs {
            match (self.components.get(&name), &host) {
                (Some(slot), _) if *slot.declared() == *spec => continue,
                (Some(slot), _) => slot.declare(spec),
                (None, Some(host)) => {
                    self.components.add(&name, host, spec);
                }
                (None, None) => continue,
            }
            loads.push(name);
        }
        Ok(loads)
    }

    /// Drops every slot of a CRD the Katalog no longer runs.
    pub fn forget(&self, crd: &str) {
        for slot in self.components.slots() {
            if belongs(&slot.name, crd) {
                self.components.remove(&slot.name);
            }
        }
    }

    fn host(&mut self, fuel: bool) -> Result<Arc<WasmHost>, Error> {
        if let Some(host) = &self.host {
            return Ok(host.clone());
        }
        let cache_dir = match &self.store.cache_dir {
            Some(dir) => dir.clone(),
            None => {
                let dir =
                    tempfile::tempdir().map_err(|e| Error::Wasm(format!("no folder for compiled components: {e}")))?;
                let path = dir.path().to_path_buf();
                self.scratch = Some(dir);
                path
            }
        };
        let options = HostOptions {
            cache_dir,
            fuel,
            registries: self.store.registries.clone(),
            tenants: (*self.tenants.rules()).clone(),
            recordings: self.store.recordings.clone(),
        };
        let host = WasmHost::with_options(Some(self.cluster.clone()), self.http.clone(), options)
            .map_err(|e| Error::Wasm(format!("the Wasm host cannot start: {e}")))?;
        self.fuel = fuel;
        self.host = Some(host.clone());
        Ok(host)
    }
}

/// Whether any of `crds` declares a fuel limit (the engine then meters fuel).
pub fn wants_fuel<'c>(crds: impl IntoIterator<Item = &'c Arc<CompiledCrd>>) -> bool {
    crds.into_iter()
        .flat_map(|crd| component_specs(crd))
        .any(|(_, spec)| spec.limits.fuel.is_some())
}
