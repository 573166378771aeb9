//! How the library's functions are listed: one entry per function (its name, the native
//! code, its usage and its documentation), gathered in domains for the reference.

use serde_json::Value;

use super::super::env::Env;

/// A native function: the evaluation environment and the evaluated arguments in, a value or
/// a message out (the caller adds the function name and position).
pub type NativeFn = fn(&Env<'_>, &[&Value]) -> Result<Value, String>;

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
