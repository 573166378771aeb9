//! Evaluates a parsed template against data: Go `text/template` semantics over JSON values,
//! nil-safe field access.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::env::Env;
use super::error::ExecError;
use super::funcs::Func;
use super::parse::{Command, Node, Operand, Pipeline};
use super::value::{display, truthy};

/// How deep notes may call notes before evaluation stops (a cycle guard).
const MAX_DEPTH: usize = 32;

pub(crate) struct State<'e, 'd> {
    pub env: &'e Env<'e>,
    pub root: &'d Value,
    /// Top-level keys seen before the root's own (the resolver's stage context).
    pub overlay: Option<&'d Map<String, Value>>,
    /// Declared variables; `$` is not stored here but resolved to the root.
    vars: Vec<(String, Value)>,
    pub depth: usize,
}

enum Flow {
    Normal,
    Break,
    Continue,
}

impl<'e, 'd> State<'e, 'd> {
    pub fn new(env: &'e Env<'e>, root: &'d Value, overlay: Option<&'d Map<String, Value>>, depth: usize) -> Self {
        Self {
            env,
            root,
            overlay,
            vars: Vec::new(),
            depth,
        }
    }

    /// Field access from the root: the overlay's key first, then the root's.
    fn root_field<'a>(&self, path: &[String], pos: usize) -> Result<Cow<'a, Value>, ExecError>
    where
        'd: 'a,
    {
        if let (Some(overlay), Some((first, rest))) = (self.overlay, path.split_first())
            && let Some(value) = overlay.get(first)
        {
            return lookup(Cow::Borrowed(value), rest, pos);
        }
        lookup(Cow::Borrowed(self.root), path, pos)
    }

    pub fn render(&mut self, nodes: &[Node], dot: &Value, out: &mut String) -> Result<(), ExecError> {
        self.walk(nodes, dot, out).map(|_| ())
    }

    /// The value of a template that is a single action (used for typed results).
    pub fn value(&mut self, pipe: &Pipeline, dot: &Value) -> Result<Value, ExecError> {
        self.pipeline(pipe, dot).map(Cow::into_owned)
    }

    fn walk(&mut self, nodes: &[Node], dot: &Value, out: &mut String) -> Result<Flow, ExecError> {
        for node in nodes {
            match node {
                Node::Text(text) => out.push_str(text),
                Node::Action(pipe) => {
                    let value = self.pipeline(pipe, dot)?;
                    if pipe.vars.is_empty() {
                        out.push_str(&display(&value));
                    }
                }
                Node::If { branches, otherwise } | Node::With { branches, otherwise } => {
                    let is_with = matches!(node, Node::With { .. });
                    let mark = self.vars.len();
                    let mut taken = false;
                    let mut flow = Flow::Normal;
                    for (pipe, body) in branches {
                        let value = self.pipeline(pipe, dot)?.into_owned();
                        if truthy(&value) {
                            flow = if is_with {
                                self.walk(body, &value, out)?
                            } else {
                                self.walk(body, dot, out)?
                            };
                            taken = true;
                            break;
                        }
                    }
                    if !taken {
                        flow = self.walk(otherwise, dot, out)?;
                    }
                    self.vars.truncate(mark);
                    if !matches!(flow, Flow::Normal) {
                        return Ok(flow);
                    }
                }
                Node::Range { pipe, body, otherwise } => {
                    let mark = self.vars.len();
                    // Range variables are bound per element, not by the pipeline itself.
                    let mut bare = pipe.clone();
                    bare.vars.clear();
                    let collection = self.pipeline(&bare, dot)?.into_owned();
                    let items: Vec<(Value, Value)> = match collection {
                        Value::Array(items) => items
                            .into_iter()
                            .enumerate()
                            .map(|(i, v)| (Value::from(i), v))
                            .collect(),
                        Value::Object(map) => {
                            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
                            entries.sort_by(|a, b| a.0.cmp(&b.0));
                            entries.into_iter().map(|(k, v)| (Value::String(k), v)).collect()
                        }
                        Value::Number(n) if n.as_i64().is_some() => (0..n.as_i64().unwrap_or(0))
                            .map(|i| (Value::from(i), Value::from(i)))
                            .collect(),
                        Value::Null => Vec::new(),
                        other => {
                            return Err(ExecError::at(
                                pipe.pos,
                                format!("range can't iterate over {}", display(&other)),
                            ));
                        }
                    };
                    if items.is_empty() {
                        self.walk(otherwise, dot, out)?;
                    }
                    for (key, item) in items {
                        self.vars.truncate(mark);
                        match pipe.vars.as_slice() {
                            [] => {}
                            [element] => self.vars.push((element.clone(), item.clone())),
                            [index, element, ..] => {
                                self.vars.push((index.clone(), key));
                                self.vars.push((element.clone(), item.clone()));
                            }
                        }
                        match self.walk(body, &item, out)? {
                            Flow::Break => break,
                            Flow::Continue | Flow::Normal => {}
                        }
                    }
                    self.vars.truncate(mark);
                }
                Node::Break => return Ok(Flow::Break),
                Node::Continue => return Ok(Flow::Continue),
            }
        }
        Ok(Flow::Normal)
    }

    fn pipeline<'a>(&mut self, pipe: &Pipeline, dot: &'a Value) -> Result<Cow<'a, Value>, ExecError>
    where
        'd: 'a,
    {
        let mut value: Option<Cow<'a, Value>> = None;
        for command in &pipe.commands {
            value = Some(self.command(command, dot, value)?);
        }
        let value = value.unwrap_or(Cow::Owned(Value::Null));
        for name in &pipe.vars {
            if pipe.assign {
                if let Some(slot) = self.vars.iter_mut().rev().find(|(n, _)| n == name) {
                    slot.1 = value.clone().into_owned();
                }
            } else {
                self.vars.push((name.clone(), value.clone().into_owned()));
            }
        }
        Ok(value)
    }

    fn command<'a>(
        &mut self,
        command: &Command,
        dot: &'a Value,
        piped: Option<Cow<'a, Value>>,
    ) -> Result<Cow<'a, Value>, ExecError>
    where
        'd: 'a,
    {
        let (first, rest) = command
            .args
            .split_first()
            .ok_or_else(|| ExecError::at(command.pos, "empty command"))?;
        if let Operand::Function(name, func) = first {
            return self.call(name, *func, rest, dot, piped, command.pos).map(Cow::Owned);
        }
        if !rest.is_empty() || piped.is_some() {
            return Err(ExecError::at(command.pos, "can't give argument to non-function"));
        }
        self.operand(first, dot, command.pos)
    }

    fn call<'a>(
        &mut self,
        name: &str,
        func: Func,
        args: &[Operand],
        dot: &'a Value,
        piped: Option<Cow<'a, Value>>,
        pos: usize,
    ) -> Result<Value, ExecError>
    where
        'd: 'a,
    {
        let fail = |message: String| ExecError::at(pos, format!("error calling {name}: {message}"));
        match func {
            // `and`/`or` stop at the first decisive argument and return it, like Go 1.18+.
            Func::And | Func::Or => {
                let count = args.len() + usize::from(piped.is_some());
                if count == 0 {
                    return Err(fail("missing arguments".into()));
                }
                let want = matches!(func, Func::Or);
                let mut last = Value::Null;
                for arg in args {
                    last = self.operand(arg, dot, pos)?.into_owned();
                    if truthy(&last) == want {
                        return Ok(last);
                    }
                }
                if let Some(piped) = piped {
                    last = piped.into_owned();
                }
                Ok(last)
            }
            Func::Native(native) => {
                // Arguments are lent, not copied: `index .spec.items 0` must not clone the list.
                let mut values: Vec<Cow<'a, Value>> = Vec::with_capacity(args.len() + 1);
                for arg in args {
                    values.push(self.operand(arg, dot, pos)?);
                }
                values.extend(piped);
                let refs: Vec<&Value> = values.iter().map(|v| v.as_ref()).collect();
                native(self.env, &refs).map_err(fail)
            }
            Func::Note(index) => {
                if !args.is_empty() || piped.is_some() {
                    return Err(fail("a note takes no arguments".into()));
                }
                if self.depth >= MAX_DEPTH {
                    return Err(fail(format!(
                        "notes call each other more than {MAX_DEPTH} deep (a cycle?)"
                    )));
                }
                let note = self
                    .env
                    .notes
                    .get(index)
                    .ok_or_else(|| fail("note not loaded".into()))?;
                note.evaluate_nested(self.env, self.root, self.overlay, self.depth + 1)
                    .map_err(|e| fail(e.message))
            }
            Func::Sentinel(index) => {
                if !args.is_empty() || piped.is_some() {
                    return Err(fail("a sentinel takes no arguments".into()));
                }
                Ok(Value::Bool(self.env.sentinels.is_set(index)))
            }
        }
    }

    fn operand<'a>(&mut self, operand: &Operand, dot: &'a Value, pos: usize) -> Result<Cow<'a, Value>, ExecError>
    where
        'd: 'a,
    {
        match operand {
            Operand::Dot => Ok(Cow::Borrowed(dot)),
            Operand::Literal(value) => Ok(Cow::Owned(value.clone())),
            Operand::Field(path) if std::ptr::eq(dot, self.root) => self.root_field(path, pos),
            Operand::Field(path) => lookup(Cow::Borrowed(dot), path, pos),
            Operand::Variable(name, path) if name.is_empty() => self.root_field(path, pos),
            Operand::Variable(name, path) => {
                let found = self.vars.iter().rev().find(|(n, _)| n == name);
                let value = found
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| ExecError::at(pos, format!("undefined variable ${name}")))?;
                lookup(Cow::Owned(value), path, pos)
            }
            Operand::Function(name, func) => self.call(name, *func, &[], dot, None, pos).map(Cow::Owned),
            Operand::Chain(pipe, path) => {
                let value = self.pipeline(pipe, dot)?;
                lookup(value, path, pos)
            }
        }
    }
}

static NULL: Value = Value::Null;

/// Follows `.a.b.c`; a missing key or a nil along the way yields nil.
fn lookup<'a>(value: Cow<'a, Value>, path: &[String], pos: usize) -> Result<Cow<'a, Value>, ExecError> {
    let mut current = value;
    for key in path {
        current = match current {
            Cow::Borrowed(Value::Object(map)) => Cow::Borrowed(map.get(key).unwrap_or(&NULL)),
            Cow::Owned(Value::Object(mut map)) => Cow::Owned(map.remove(key).unwrap_or(Value::Null)),
            Cow::Borrowed(Value::Null) | Cow::Owned(Value::Null) => return Ok(Cow::Owned(Value::Null)),
            other => {
                return Err(ExecError::at(
                    pos,
                    format!("can't evaluate field {key} in type {}", super::value::kind(&other)),
                ));
            }
        };
    }
    Ok(current)
}
