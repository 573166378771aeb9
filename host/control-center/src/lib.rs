//! The Control Center: one web UI over the Live APIs of any number of runtimes. It polls
//! each runtime's `/katalog` and `/components` (keeping an hour of history for the charts)
//! and asks a runtime for the rest when a page shows it; a runtime that is down is marked
//! unreachable and asked again at every poll. Served under `/controlcenter`; pages keep
//! themselves current without a reload. Pure HTTP: it needs no cluster access of its own.
//!
//! - [`config`]: the runtimes to watch (command line, config file);
//! - [`runtimes`]: polling, and what each runtime last said;
//! - [`history`]: the last hour, for the charts;
//! - [`login`]: the admin password and sessions; [`csrf`]: forms only from its own pages;
//! - [`pages`]: what each page shows; [`server`]: the routes.

mod addressed;
pub mod config;
pub mod csrf;
pub mod history;
pub mod login;
pub mod pages;
pub mod runtimes;
pub mod server;

pub use server::{Options, serve};
