//! Rehearsals: what a reconcile would do, found without doing it. A [`dry_run`] client turns
//! every write into the API server's own dry run and records it; [`plan`] reads the record
//! against the objects as they are and says, field by field ([`diff`]), what would be
//! created, changed or deleted. Offline, a [`stand_in`] API server in memory answers the
//! reconcile instead (`ork simulate`).

pub mod diff;
pub mod dry_run;
pub mod plan;
pub mod simulate;
pub mod stand_in;
