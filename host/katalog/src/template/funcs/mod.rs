//! The functions a template may call: Go's builtins, the notes library (pure, nil-safe, no
//! I/O) by domain, the sentinels of the current event, and the Katalog's own notes.
//!
//! As in Go, a piped value arrives as the last argument: `{{ .spec.image | default "nginx" }}`
//! calls `default "nginx" <image>`.

mod args;
mod builtins;
mod cluster;
mod collections;
mod conditional;
mod cron;
mod data;
mod enriched;
mod kubernetes;
mod math;
mod network;
mod objects;
mod pods;
pub(crate) mod quantity;
mod semver;
mod strings;
mod time;
mod types;
mod validation;
mod workloads;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use serde_json::Value;

use super::Env;
use super::parse::Node;

/// A native function: the evaluation environment and the evaluated arguments in, a value or
/// a message out (the caller adds the function name and position).
pub type NativeFn = fn(&Env<'_>, &[&Value]) -> Result<Value, String>;

/// What a name resolves to at compile time.
#[derive(Clone, Copy)]
pub enum Func {
    Native(NativeFn),
    /// `and`: returns the first falsy argument or the last; later arguments are not evaluated.
    And,
    /// `or`: returns the first truthy argument or the last; later arguments are not evaluated.
    Or,
    /// A Katalog note, by index in the notes list of the [`Env`].
    Note(usize),
    /// A sentinel of the current event, by index in [`crate::sentinel::NAMES`].
    Sentinel(usize),
}

impl std::fmt::Debug for Func {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Func::Native(_) => f.write_str("Native"),
            Func::And => f.write_str("And"),
            Func::Or => f.write_str("Or"),
            Func::Note(i) => write!(f, "Note({i})"),
            Func::Sentinel(i) => write!(f, "Sentinel({i})"),
        }
    }
}

/// One documented library function.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub name: &'static str,
    pub func: NativeFn,
    /// Argument list as a user writes it, e.g. `default DEFAULT VALUE`.
    pub usage: &'static str,
    pub doc: &'static str,
}

/// A library domain (Strings, Math, ...).
#[derive(Debug, Clone, Copy)]
pub struct Domain {
    pub name: &'static str,
    pub entries: &'static [Entry],
}

/// Every domain of the built-in library, in documentation order.
pub const DOMAINS: &[Domain] = &[
    Domain {
        name: "Go builtins",
        entries: builtins::FUNCS,
    },
    Domain {
        name: "String",
        entries: strings::FUNCS,
    },
    Domain {
        name: "Math",
        entries: math::FUNCS,
    },
    Domain {
        name: "Conditional",
        entries: conditional::FUNCS,
    },
    Domain {
        name: "Type",
        entries: types::FUNCS,
    },
    Domain {
        name: "Data",
        entries: data::FUNCS,
    },
    Domain {
        name: "Random",
        entries: data::RANDOM,
    },
    Domain {
        name: "Time",
        entries: time::FUNCS,
    },
    Domain {
        name: "Cron",
        entries: cron::FUNCS,
    },
    Domain {
        name: "Semver",
        entries: semver::FUNCS,
    },
    Domain {
        name: "Network",
        entries: network::FUNCS,
    },
    Domain {
        name: "Quantities",
        entries: quantity::FUNCS,
    },
    Domain {
        name: "List/Map",
        entries: collections::FUNCS,
    },
    Domain {
        name: "Safe access and coercion",
        entries: collections::ACCESS,
    },
    Domain {
        name: "Kubernetes",
        entries: kubernetes::FUNCS,
    },
    Domain {
        name: "Labels, annotations and status fields",
        entries: objects::FUNCS,
    },
    Domain {
        name: "Validation",
        entries: validation::FUNCS,
    },
    Domain {
        name: "Replicas, services, containers, jobs",
        entries: workloads::WORKLOADS,
    },
    Domain {
        name: "Enrichment",
        entries: kubernetes::ENRICHMENT,
    },
    Domain {
        name: "Enriched children",
        entries: enriched::FUNCS,
    },
    Domain {
        name: "Pods and warnings",
        entries: pods::FUNCS,
    },
    Domain {
        name: "Nodes, StatefulSets, CronJobs",
        entries: cluster::FUNCS,
    },
    Domain {
        name: "Serve provenance",
        entries: kubernetes::SERVE,
    },
    Domain {
        name: "Prometheus",
        entries: math::PROMETHEUS,
    },
];

/// A name → function table used at compile time.
#[derive(Debug, Clone)]
pub struct Functions {
    map: HashMap<String, Func>,
    /// Parsed templates by source, shared by the clones of one Katalog's table: validation
    /// and every compiled box draw from it, so each template text is parsed once per load.
    /// Only the Katalog's own text is ever compiled, so it cannot grow at run time; the
    /// built-in table has none.
    parsed: Option<Arc<ParseCache>>,
}

/// Template parses by source text.
type ParseCache = Mutex<HashMap<String, Arc<Vec<Node>>>>;

static BUILTIN: LazyLock<Functions> = LazyLock::new(|| {
    let mut map = HashMap::new();
    for domain in DOMAINS {
        for entry in domain.entries {
            map.insert(entry.name.to_string(), Func::Native(entry.func));
        }
    }
    map.insert("and".into(), Func::And);
    map.insert("or".into(), Func::Or);
    for (i, name) in crate::sentinel::NAMES.iter().enumerate() {
        map.insert((*name).to_string(), Func::Sentinel(i));
    }
    Functions { map, parsed: None }
});

impl Functions {
    /// The built-in library plus the sentinel names.
    pub fn builtin() -> &'static Functions {
        &BUILTIN
    }

    /// The built-ins plus notes, each `names[i]` resolving to [`Func::Note`]`(i)`. A note
    /// with a built-in's name replaces it (callers decide whether that is allowed).
    pub fn with_notes<'a>(names: impl IntoIterator<Item = &'a str>) -> Functions {
        let mut functions = BUILTIN.clone();
        for (i, name) in names.into_iter().enumerate() {
            functions.map.insert(name.to_string(), Func::Note(i));
        }
        functions.parsed = Some(Arc::default());
        functions
    }

    /// A parse of `source` made earlier with this table.
    pub(in crate::template) fn parsed(&self, source: &str) -> Option<Arc<Vec<Node>>> {
        let cache = self.parsed.as_ref()?;
        cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(source)
            .cloned()
    }

    pub(in crate::template) fn remember(&self, source: &str, nodes: &Arc<Vec<Node>>) {
        if let Some(cache) = &self.parsed {
            let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
            cache.insert(source.to_string(), nodes.clone());
        }
    }

    /// Looks a name up.
    pub fn get(&self, name: &str) -> Option<Func> {
        self.map.get(name).copied()
    }

    /// True for names of the built-in library (including `and`, `or` and sentinels).
    pub fn is_builtin(name: &str) -> bool {
        BUILTIN.map.contains_key(name)
    }

    /// The documentation entry of a built-in.
    pub fn doc(name: &str) -> Option<(&'static str, &'static Entry)> {
        DOMAINS
            .iter()
            .find_map(|d| d.entries.iter().find(|e| e.name == name).map(|e| (d.name, e)))
    }
}
