//! A JSON value whose strings may be templates (every string holding `{{` is one), compiled
//! once and rendered per object: resource fields, external call bodies, component args.

use serde_json::{Map, Value};

use crate::resolver::Resolver;
use crate::template::{ExecError, Functions, ParseError, Template};

/// A value whose strings may be templates.
#[derive(Debug, Clone)]
pub enum Tree {
    Literal(Value),
    Template(Template),
    List(Vec<Tree>),
    Map(Vec<(String, Tree)>),
}

impl Tree {
    /// # Errors
    /// The first string that is not a valid template.
    pub fn compile(value: &Value, functions: &Functions) -> Result<Self, ParseError> {
        Ok(match value {
            Value::String(s) if s.contains("{{") => Tree::Template(Template::compile(s, functions)?),
            Value::Array(items) => Tree::List(
                items
                    .iter()
                    .map(|i| Tree::compile(i, functions))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Tree::Map(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), Tree::compile(v, functions)?)))
                    .collect::<Result<_, ParseError>>()?,
            ),
            other => Tree::Literal(other.clone()),
        })
    }

    /// # Errors
    /// The first template that fails to evaluate.
    pub fn render(&self, resolver: &Resolver<'_, '_>) -> Result<Value, ExecError> {
        Ok(match self {
            Tree::Literal(value) => value.clone(),
            Tree::Template(template) => Value::String(resolver.render(template)?),
            Tree::List(items) => Value::Array(items.iter().map(|i| i.render(resolver)).collect::<Result<_, _>>()?),
            Tree::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), v.render(resolver)?)))
                    .collect::<Result<Map<_, _>, ExecError>>()?,
            ),
        })
    }
}
