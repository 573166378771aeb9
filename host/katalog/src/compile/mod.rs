//! The compile pass: a loaded Katalog in, every CRD ready to run out (templates parsed,
//! conditions built, defaults applied, one compiled box per effective operator box), or
//! errors that name the field. Loading runs it, so `ork validate` and `ork run` see the same
//! result, and nothing is compiled while the runtime runs.

mod block;
mod boxes;
mod call;
mod conversion;
mod crd;
pub mod enrich;
mod gate;
mod placement;
mod tenants;
mod watch;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use crate::cross::{CrossRead, Protocol, Remote, Token};
pub use crate::serve::{CompiledServe, IntentField, Response, Surface};
pub use block::{Block, Entry, ProfileChoice, Replace, Scale};
pub use boxes::{CompiledBox, EmitEvent, EmitOn, Requeue, StatusField};
pub use call::Call;
pub use conversion::CompiledConversion;
pub use crd::{
    AGING, Autoscale, Behaviour, CompiledCrd, Endpoints, FlowBy, FlowRules, RetryPolicy, Stamping, applied_kinds,
};
pub use gate::{BoxGates, Gate};
pub use placement::admit;
pub use tenants::{ApiRate, DEFAULT_WASM_CALLS, DEFAULT_WASM_CPU, TenantLimits, TenantRules, WASM_CALLS_MAX};
pub use watch::{CompiledEvents, CompiledWatch};

pub use crate::gather::Error;
use crate::gather::{Gather, conditions, template, tree};
use crate::loaded::Katalog;
use crate::model::NoteSpec;
use crate::serve::intent::Served;
use orkestra_expr::template::{Functions, Template};

/// Concurrent reconciles per CRD when the Katalog does not say (controller-runtime's
/// default, and what upstream's generic reconciler falls back to).
pub const DEFAULT_WORKERS: usize = 1;
/// Full resync period when the Katalog does not say.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(30);
/// Consecutive failures before a CRD's health turns Degraded, when the Katalog does not say.
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 5;
/// The finalizer this runtime always adds.
pub const CLEANUP_FINALIZER: &str = "orkestra.orkspace.io/cleanup";

/// The Katalog's notes, compiled once for every template of every CRD.
#[derive(Debug, Clone)]
pub struct Notes {
    pub functions: Functions,
    pub templates: Arc<Vec<Template>>,
}

impl Notes {
    /// Compiles each note with `functions` (which must know every note's name). Errors name
    /// the note (`notes[i].expression`, counted over every file's notes).
    pub fn compile(notes: &[NoteSpec], functions: Functions) -> Result<Self, Error> {
        let templates = notes
            .iter()
            .enumerate()
            .map(|(i, n)| template(&n.expression, &functions).map_err(|e| e.within(&format!("notes[{i}].expression"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            functions,
            templates: Arc::new(templates),
        })
    }
}

/// A Katalog compiled: what loading returns.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The merged, validated model (for what needs the Katalog as written: CRD install,
    /// samples, the Live API).
    pub katalog: Katalog,
    pub notes: Notes,
    /// Every CRD, enabled or not, by name.
    pub crds: BTreeMap<String, Arc<CompiledCrd>>,
    /// What one namespace may take of the runtime (`spec.tenants`, defaults filled in).
    pub tenants: TenantRules,
}

impl Compiled {
    /// The CRDs the runtime runs.
    pub fn enabled(&self) -> impl Iterator<Item = &Arc<CompiledCrd>> {
        self.crds
            .values()
            .filter(|c| self.katalog.crds.get(&*c.name).is_some_and(|l| l.entry.enabled))
    }
}

impl Compiled {
    /// The enabled CRDs the Serve API serves.
    pub fn served_crds(&self) -> impl Iterator<Item = &Arc<CompiledCrd>> {
        self.enabled().filter(|crd| crd.serve.is_some())
    }

    /// The served CRD a Serve API target name reaches, what a CR of it is made from, and the
    /// surface.
    pub fn target(&self, name: &str) -> Option<(&Arc<CompiledCrd>, Served<'_>, &Surface)> {
        self.served_crds().find_map(|crd| {
            let surface = crd.serve.as_ref()?.surface(name)?;
            Some((crd, crd.served()?, surface))
        })
    }

    /// The served CRD of a kind (any case) and, when given, an apiVersion, and what a CR of
    /// it is made from.
    pub fn served_kind(&self, api_version: Option<&str>, kind: &str) -> Option<(&Arc<CompiledCrd>, Served<'_>)> {
        self.served_crds()
            .filter(|crd| crd.kind.eq_ignore_ascii_case(kind))
            .filter_map(|crd| Some((crd, crd.served()?)))
            .find(|(_, served)| api_version.is_none_or(|v| v == served.api_version))
    }
}

/// Compiles every CRD of `katalog`: the compiled form, or every CRD's error (its path starts
/// with `spec.crds.<name>.`, or `notes[i]`).
pub fn compile(katalog: Katalog, functions: Functions) -> Result<Compiled, Vec<Error>> {
    let notes = Notes::compile(&katalog.notes, functions).map_err(|e| vec![e])?;
    let mut crds = BTreeMap::new();
    let mut errors = Gather::default();
    for (name, crd) in &katalog.crds {
        let compiled = CompiledCrd::compile(&katalog, crd, &notes);
        if let Some(compiled) = errors.all(&format!("spec.crds.{name}"), compiled) {
            crds.insert(name.clone(), Arc::new(compiled));
        }
    }
    let enabled = crds
        .values()
        .filter(|c| katalog.crds.get(&*c.name).is_some_and(|l| l.entry.enabled))
        .map(|c| &**c);
    let tenants = TenantRules::compile(katalog.tenants.as_ref(), enabled, &mut errors);
    errors.finish()?;
    Ok(Compiled {
        katalog,
        notes,
        crds,
        tenants,
    })
}
