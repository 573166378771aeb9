//! A template's two errors, each with the byte offset it names: a syntax error at compile,
//! an evaluation error at render.

/// A syntax error: its byte offset in the template and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template syntax error at byte {offset}: {message}")]
pub struct ParseError {
    pub offset: usize,
    pub message: String,
}

impl ParseError {
    pub(crate) fn at(offset: usize, message: impl Into<String>) -> Self {
        Self {
            offset,
            message: message.into(),
        }
    }
}

/// An evaluation error: the byte offset of the failing command and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template error at byte {offset}: {message}")]
pub struct ExecError {
    pub offset: usize,
    pub message: String,
}

impl ExecError {
    pub(crate) fn at(offset: usize, message: impl Into<String>) -> Self {
        Self {
            offset,
            message: message.into(),
        }
    }
}
