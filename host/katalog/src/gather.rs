//! What every compile reports through: an [`Error`] that names its field, [`Gather`] that
//! keeps every error of a pass rather than the first, and the helpers that compile a
//! template, conditions or a template tree into one. The compile of each concept sits beside
//! the concept (`compile/`, `serve/compile.rs`, `cross/compile.rs`); `compile` runs them all.

use std::fmt;

use serde_json::Value;

use orkestra_expr::condition::{ConditionSpec, Conditions};
use orkestra_expr::template::{Functions, Template};
use orkestra_expr::tree::Tree;

/// A compile failure: the field (a dot path, relative to what was being compiled until the
/// caller puts it in place with [`Error::within`]) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path.is_empty() {
            true => f.write_str(&self.message),
            false => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The same error one level further out: `key` goes in front of its path.
    pub fn within(mut self, key: &str) -> Self {
        self.path = match (self.path.is_empty(), self.path.starts_with('[')) {
            (true, _) => key.to_string(),
            (false, true) => format!("{key}{}", self.path),
            (false, false) => format!("{key}.{}", self.path),
        };
        self
    }
}

/// Every error of one compile, gathered rather than stopping at the first, so that loading
/// reports them all.
#[derive(Default)]
pub(crate) struct Gather(pub(crate) Vec<Error>);

impl Gather {
    /// `result`'s value, or `None` with its error kept.
    pub(crate) fn ok<T>(&mut self, result: Result<T, Error>) -> Option<T> {
        result.map_err(|e| self.0.push(e)).ok()
    }

    /// The same for a part that gathers its own errors; they are placed under `key`.
    pub(crate) fn all<T>(&mut self, key: &str, result: Result<T, Vec<Error>>) -> Option<T> {
        result
            .map_err(|errors| self.0.extend(errors.into_iter().map(|e| e.within(key))))
            .ok()
    }

    /// The values of the results that compiled.
    pub(crate) fn each<T>(&mut self, results: impl IntoIterator<Item = Result<T, Error>>) -> Vec<T> {
        results.into_iter().filter_map(|r| self.ok(r)).collect()
    }

    pub(crate) fn push(&mut self, error: Error) {
        self.0.push(error);
    }

    /// `Err` with every error gathered, if any.
    pub(crate) fn finish(self) -> Result<(), Vec<Error>> {
        match self.0.is_empty() {
            true => Ok(()),
            false => Err(self.0),
        }
    }
}

/// Compiles one template; a syntax error gives its column inside the template.
pub(crate) fn template(text: &str, functions: &Functions) -> Result<Template, Error> {
    Template::compile(text, functions).map_err(|e| {
        let column = orkestra_expr::template::column(text, e.offset);
        Error::at(
            "",
            format!(
                "template syntax error at column {column} of the template: {}",
                e.message
            ),
        )
    })
}

/// Compiles `when` and `or`; the error names the condition and its key (`when[0].equals`).
pub(crate) fn conditions(
    when: &[ConditionSpec],
    or: &[ConditionSpec],
    functions: &Functions,
) -> Result<Conditions, Error> {
    Conditions::compile(when, or, functions).map_err(|(at, e)| Error::at(format!("{at}.{}", e.key), e.message))
}

/// Compiles a value whose strings may be templates.
pub(crate) fn tree(value: &Value, functions: &Functions) -> Result<Tree, Error> {
    Tree::compile(value, functions).map_err(|e| Error::at("", e.message))
}
