//! The host's network doors, set up one way. Every listener (the admission webhooks, the
//! Live API with the Serve API under it, `ork gateway`'s port, the Control Center) runs
//! through [`server::serve`]: a header and idle timeout, a whole-request deadline, a cap on
//! connections and on connections per peer that evicts the oldest idle connection, then one
//! still receiving a body, before it refuses a new one (so probes and the API server's
//! admission calls keep getting in while someone holds thousands of idle connections or
//! drips bodies into them), request bodies held to a deadline and a minimum rate
//! ([`pace`]), a default body limit, and, where a browser
//! can reach a door without credentials, a Host allow-list ([`hosts`]) against DNS
//! rebinding. Answers the host reads from elsewhere (registries, runtimes, external calls)
//! are read within a size limit as they stream in ([`read`]).

pub mod hosts;
pub mod pace;
pub mod read;
pub mod server;

pub use hosts::Hosts;
pub use pace::Pace;
pub use server::{Door, Limits, serve};
