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
mod entry;
mod kubernetes;
mod math;
mod network;
mod objects;
mod pods;
pub mod quantity;
mod semver;
mod strings;
mod time;
mod types;
mod validation;
mod workloads;

pub use entry::{Domain, Entry, NativeFn};

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
