//! Integration tests against a real kube-apiserver + etcd (+ kube-controller-manager).
//! One binary, so kube is linked once; one shared control plane per run
//! (`orkestra_test_support`), plus the `ork` binary itself for CLI-level tests.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks name the objects they create; no tenant input reaches these calls"
)]

mod campaign;
mod cli;
mod cluster;
mod control_center;
mod control_plane;
mod deploy;
mod doors;
mod failure;
mod faults;
mod gateway;
mod guest_sdk;
mod helm;
mod in_cluster;
mod intake;
mod isolation;
mod katalogs;
mod kinds;
mod lifecycle;
mod live;
mod names;
mod nodes;
mod oci;
mod ork;
mod pipeline;
mod plan;
mod policies;
mod pool;
mod provenance;
mod reconcile;
mod reload;
mod replay;
mod replicas;
mod rollout;
mod routing;
mod running;
mod scaffold;
mod setup_wait;
mod simulate;
mod storms;
mod tenants;
mod token;
mod traces;
mod upstream;
mod warm;
mod wasm;
