//! Go `text/template` for Katalogs: a template string is compiled once at load (every
//! function name resolved, every syntax error reported with its column) and evaluated many
//! times against JSON data without re-parsing.
//!
//! Pure: no kube or wasmtime imports.
//!
//! Differences from Go, on purpose: field access is nil-safe (`.spec.a.b` on a missing `a`
//! is nil, not an error), nil prints as the empty string (Go prints `<no value>`), and `eq`
//! compares a number with a numeric string by value. `define`/`template`/`block` are not
//! supported: Katalogs share logic through notes.

mod env;
mod error;
mod exec;
pub mod funcs;
mod functions;
mod lex;
mod parse;
pub mod value;

use std::sync::Arc;

use serde_json::{Map, Value};

pub use env::Env;
pub use error::{ExecError, ParseError};
pub use funcs::Func;
pub use functions::Functions;

/// The 1-based column of a byte offset within `src` (counted in characters).
pub fn column(src: &str, offset: usize) -> usize {
    src.get(..offset.min(src.len()))
        .map_or(1, |prefix| prefix.chars().count() + 1)
}

/// A compiled template.
#[derive(Debug, Clone)]
pub struct Template {
    source: String,
    body: Body,
}

#[derive(Debug, Clone)]
enum Body {
    /// No `{{`: the text is the result, nothing to evaluate.
    Literal,
    /// Shared: one Katalog's identical templates hold one parse.
    Nodes(Arc<Vec<parse::Node>>),
}

impl Template {
    /// Compiles `source`, resolving function names against `functions`.
    pub fn compile(source: &str, functions: &Functions) -> Result<Self, ParseError> {
        let body = if source.contains("{{") {
            match functions.parsed(source) {
                Some(nodes) => Body::Nodes(nodes),
                None => {
                    let nodes = Arc::new(parse::parse(lex::lex(source)?, &|name| functions.get(name))?);
                    functions.remember(source, &nodes);
                    Body::Nodes(nodes)
                }
            }
        } else {
            Body::Literal
        };
        Ok(Self {
            source: source.to_string(),
            body,
        })
    }

    /// The source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// True when the source has no actions.
    pub fn is_literal(&self) -> bool {
        matches!(self.body, Body::Literal)
    }

    /// Renders to text.
    pub fn render(&self, env: &Env<'_>, data: &Value) -> Result<String, ExecError> {
        self.render_in(env, data, None)
    }

    /// Renders with `overlay` keys visible at the top level next to `data`'s own (they win).
    pub fn render_in(
        &self,
        env: &Env<'_>,
        data: &Value,
        overlay: Option<&Map<String, Value>>,
    ) -> Result<String, ExecError> {
        match &self.body {
            Body::Literal => Ok(self.source.clone()),
            Body::Nodes(nodes) => {
                let mut out = String::new();
                exec::State::new(env, data, overlay, 0).render(nodes, data, &mut out)?;
                Ok(out)
            }
        }
    }

    /// Evaluates to a value: a template that is exactly one action yields that action's
    /// value with its type (a bool stays a bool); anything else yields the rendered text.
    pub fn evaluate(&self, env: &Env<'_>, data: &Value) -> Result<Value, ExecError> {
        self.evaluate_nested(env, data, None, 0)
    }

    /// [`Template::evaluate`] with overlay keys (see [`Template::render_in`]).
    pub fn evaluate_in(
        &self,
        env: &Env<'_>,
        data: &Value,
        overlay: Option<&Map<String, Value>>,
    ) -> Result<Value, ExecError> {
        self.evaluate_nested(env, data, overlay, 0)
    }

    fn evaluate_nested(
        &self,
        env: &Env<'_>,
        data: &Value,
        overlay: Option<&Map<String, Value>>,
        depth: usize,
    ) -> Result<Value, ExecError> {
        match &self.body {
            Body::Nodes(nodes) => match nodes.as_slice() {
                [parse::Node::Action(pipe)] if pipe.vars.is_empty() => {
                    exec::State::new(env, data, overlay, depth).value(pipe, data)
                }
                _ => {
                    let mut out = String::new();
                    exec::State::new(env, data, overlay, depth).render(nodes, data, &mut out)?;
                    Ok(Value::String(out))
                }
            },
            Body::Literal => Ok(Value::String(self.source.clone())),
        }
    }

    /// The names of the functions this template calls (for checks such as "sentinel used
    /// but not declared").
    pub fn functions_called(&self) -> Vec<(String, Func)> {
        let mut found = Vec::new();
        if let Body::Nodes(nodes) = &self.body {
            parse::collect_functions(nodes, &mut found);
        }
        found
    }
}

#[cfg(test)]
mod tests;
