//! What the effects refuse: an external call that failed where the Katalog does not go on,
//! and a `tls` block that makes no certificate.

/// A failed effect, by which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An external call without `continueOnError` that failed: its name, and why.
    #[error("external call {name}: {why}")]
    External { name: String, why: String },
    /// A `tls` block that does not make a certificate (the message names the field).
    #[error("{0}")]
    Certificate(String),
}

/// Where the text is the value (an admission's answer, a condition's message), an error is
/// its message.
impl From<Error> for String {
    fn from(error: Error) -> Self {
        error.to_string()
    }
}
