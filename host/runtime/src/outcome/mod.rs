//! What reconciles leave behind, and what the gates and the Live API read of it: the health
//! state machine ([`health`]), why a reconcile failed ([`failure`]), the counts per CRD
//! ([`counters`]), the write budget a CR that never settles is held to ([`budget`]), and what
//! makes a child ready ([`readiness`]), and the permissions the runtime was found to lack
//! ([`permissions`]).

pub mod budget;
pub mod counters;
pub mod failure;
pub mod health;
pub mod permissions;
pub mod readiness;
