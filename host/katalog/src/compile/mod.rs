//! The compile pass: a loaded Katalog in, every CRD ready to run out (templates parsed,
//! conditions built, defaults applied, one compiled box per effective operator box), or
//! errors that name the field. Loading runs it, so `ork validate` and `ork run` see the same
//! result, and nothing is compiled while the runtime runs.

mod block;
mod boxes;
mod call;
mod conversion;
mod crd;
mod cross;
pub mod enrich;
mod gate;
mod placement;
mod serve;
mod serve_rules;
mod watch;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use block::{Block, Entry, ProfileChoice, Replace, Scale};
pub use boxes::{CompiledBox, EmitEvent, EmitOn, Requeue, StatusField};
pub use call::Call;
pub use conversion::CompiledConversion;
pub use crd::{Autoscale, Behaviour, CompiledCrd, Endpoints, RetryPolicy, applied_kinds};
pub use cross::{CrossRead, Protocol, Remote, Token};
pub use gate::{BoxGates, Gate};
pub use placement::admit;
pub use serve::{CompiledServe, IntentField, Response, Surface};
pub use watch::{CompiledEvents, CompiledWatch};

use crate::NoteSpec;
use crate::loaded::Katalog;
use orkestra_expr::condition::{ConditionSpec, Conditions};
use orkestra_expr::template::{Functions, Template};
use orkestra_expr::tree::Tree;

/// Concurrent reconciles per CRD when the Katalog does not say (controller-runtime's
/// default, and what upstream's generic reconciler falls back to).
pub const DEFAULT_WORKERS: usize = 1;
/// Full resync period when the Katalog does not say.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(30);
/// Consecutive failures before a CRD's health turns Degraded, when the Katalog does not say.
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 5;
/// The finalizer this runtime always adds.
pub const CLEANUP_FINALIZER: &str = "orkestra.orkspace.io/cleanup";

/// A compile failure: the field (a dot path, relative to what was being compiled until the
/// caller puts it in place with [`Error::within`]) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path.is_empty() {
            true => f.write_str(&self.message),
            false => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The same error one level further out: `key` goes in front of its path.
    pub fn within(mut self, key: &str) -> Self {
        self.path = match (self.path.is_empty(), self.path.starts_with('[')) {
            (true, _) => key.to_string(),
            (false, true) => format!("{key}{}", self.path),
            (false, false) => format!("{key}.{}", self.path),
        };
        self
    }
}

/// Every error of one compile, gathered rather than stopping at the first, so that loading
/// reports them all.
#[derive(Default)]
struct Gather(Vec<Error>);

impl Gather {
    /// `result`'s value, or `None` with its error kept.
    fn ok<T>(&mut self, result: Result<T, Error>) -> Option<T> {
        result.map_err(|e| self.0.push(e)).ok()
    }

    /// The same for a part that gathers its own errors; they are placed under `key`.
    fn all<T>(&mut self, key: &str, result: Result<T, Vec<Error>>) -> Option<T> {
        result
            .map_err(|errors| self.0.extend(errors.into_iter().map(|e| e.within(key))))
            .ok()
    }

    /// The values of the results that compiled.
    fn each<T>(&mut self, results: impl IntoIterator<Item = Result<T, Error>>) -> Vec<T> {
        results.into_iter().filter_map(|r| self.ok(r)).collect()
    }

    fn push(&mut self, error: Error) {
        self.0.push(error);
    }

    /// `Err` with every error gathered, if any.
    fn finish(self) -> Result<(), Vec<Error>> {
        match self.0.is_empty() {
            true => Ok(()),
            false => Err(self.0),
        }
    }
}

/// Compiles one template; a syntax error gives its column inside the template.
fn template(text: &str, functions: &Functions) -> Result<Template, Error> {
    Template::compile(text, functions).map_err(|e| {
        let column = orkestra_expr::template::column(text, e.offset);
        Error::at(
            "",
            format!(
                "template syntax error at column {column} of the template: {}",
                e.message
            ),
        )
    })
}

/// Compiles `when` and `or`; the error names the condition and its key (`when[0].equals`).
fn conditions(when: &[ConditionSpec], or: &[ConditionSpec], functions: &Functions) -> Result<Conditions, Error> {
    Conditions::compile(when, or, functions).map_err(|(at, e)| Error::at(format!("{at}.{}", e.key), e.message))
}

fn tree(value: &Value, functions: &Functions) -> Result<Tree, Error> {
    Tree::compile(value, functions).map_err(|message| Error::at("", message))
}

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
}

impl Compiled {
    /// The CRDs the runtime runs.
    pub fn enabled(&self) -> impl Iterator<Item = &Arc<CompiledCrd>> {
        self.crds
            .values()
            .filter(|c| self.katalog.crds.get(&*c.name).is_some_and(|l| l.entry.enabled))
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
    errors.finish()?;
    Ok(Compiled { katalog, notes, crds })
}
