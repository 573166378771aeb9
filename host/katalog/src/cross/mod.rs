//! Cross reads (`observe.cross`): one CR reading another CRD's CRs. Their types, as the
//! Katalog is written, are in `model/operator_box.rs` (a box holds them); the rest is here:
//! - [`target`]: which CRD a read names (by key, by the CRD's labels, or by kind), resolved
//!   once at load;
//! - `check`: every read names one CRD that exists;
//! - [`compile`]: the read's templates compiled; reading itself is the runtime's.

mod check;
pub mod compile;
pub(crate) mod target;

pub use compile::{CrossRead, Protocol, Remote, Token};
