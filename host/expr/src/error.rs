//! What this crate's parsers and checks refuse, typed by what was wrong. Every message names
//! the text as its author wrote it. Templates keep their own errors
//! ([`crate::template::ParseError`], [`crate::template::ExecError`]), which carry offsets.

/// A value of the expression language that does not parse or does not pass its check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A duration that does not parse, or is negative or out of range where that is refused.
    #[error("{0}")]
    Duration(String),
    /// A cron expression: its field count, or which field and what is wrong with it.
    #[error("{0}")]
    Cron(String),
    /// A time of day that is not `HH:MM`.
    #[error("{0}")]
    ClockTime(String),
    /// A name that may not name an object (shown bounded).
    #[error("name {name:?} {why}")]
    Name { name: String, why: &'static str },
    /// A namespace that is not a DNS-1123 label (shown bounded).
    #[error("namespace {0:?} is not a DNS-1123 label (lowercase letters, digits and '-', at most 63)")]
    Namespace(String),
    /// Two values `lt`, `le`, `gt` and `ge` cannot order.
    #[error("incompatible types for comparison: {0} and {1}")]
    Incomparable(&'static str, &'static str),
    /// A comparison with a NaN.
    #[error("cannot compare NaN")]
    NaN,
    /// A text that is not a Kubernetes quantity.
    #[error("not a quantity: {0:?}")]
    Quantity(String),
}

/// Where the text is the value (a template function's answer, a diagnostic's message), an
/// error of this crate is its message.
impl From<Error> for String {
    fn from(error: Error) -> Self {
        error.to_string()
    }
}
