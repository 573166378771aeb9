//! What every Katalog check reports through: the [`Checker`] that gathers errors and warnings
//! with their file position, and the checks every part of a Katalog shares (templates,
//! conditions, durations). The checks of each concept are `impl Checker` blocks beside the
//! concept (`validate/`, `serve/check.rs`, `cross/check.rs`); `validate` runs them all.

use orkestra_expr::condition::{Check, ConditionSpec};
use orkestra_expr::template::{Func, Functions};

use crate::de::Problem;
use crate::model::{CrdEntry, OperatorBox, box_path};
use crate::yaml::{Node, NodeValue, Pos};

pub(crate) struct Checker<'a> {
    pub(crate) problems: &'a mut Vec<Problem>,
    pub(crate) warnings: &'a mut Vec<Problem>,
    pub(crate) functions: &'a Functions,
}

impl Checker<'_> {
    pub(crate) fn error(&mut self, path: impl Into<String>, pos: Pos, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            pos,
            message: message.into(),
        });
    }

    pub(crate) fn warn(&mut self, path: impl Into<String>, pos: Pos, message: impl Into<String>) {
        self.warnings.push(Problem {
            path: path.into(),
            pos,
            message: message.into(),
        });
    }

    /// Compiles every condition of both lists, reporting each one that fails.
    pub(crate) fn conditions(&mut self, when: &[ConditionSpec], or: &[ConditionSpec], path: &str, node: &Node) {
        for (list, specs) in [("when", when), ("or", or)] {
            for (i, spec) in specs.iter().enumerate() {
                let condition_node = item(node.get(list), i).unwrap_or(node);
                self.condition(spec, &format!("{path}.{list}[{i}]"), condition_node);
            }
        }
    }

    pub(crate) fn condition(&mut self, spec: &ConditionSpec, path: &str, node: &Node) {
        // Template syntax errors are reported by the template walk, with their column.
        if let Err(error) = Check::compile(spec, self.functions)
            && error.offset.is_none()
        {
            let pos = node.get(error.key).map_or(node.pos, |k| k.pos);
            self.error(format!("{path}.{}", error.key), pos, error.message);
        }
    }

    pub(crate) fn duration(&mut self, value: Option<&str>, path: &str, node: &Node) {
        let Some(text) = value else { return };
        if text.contains("{{") {
            return;
        }
        if let Err(message) = orkestra_expr::duration::parse(text) {
            let key = path.rsplit('.').next().unwrap_or_default();
            let pos = node.get(key).map_or(node.pos, |n| n.pos);
            self.error(path, pos, message);
        }
    }

    /// Compiles every string holding `{{` under `node`; inside gates sentinel functions are
    /// allowed (declaration is checked per gate), elsewhere they are an error.
    pub(crate) fn templates(&mut self, node: &Node, path: &str, scope: Scope) {
        match &node.value {
            NodeValue::String(text) if text.contains("{{") => match crate::gather::template(text, self.functions) {
                Ok(template) => {
                    if scope == Scope::Outside {
                        for (name, func) in template.functions_called() {
                            if matches!(func, Func::Sentinel(_)) {
                                self.error(
                                    path,
                                    node.pos,
                                    format!("sentinel \"{name}\" is only available in preReconcile gates"),
                                );
                            }
                        }
                    }
                }
                Err(e) => self.error(path, node.pos, e.message),
            },
            NodeValue::Map(entries) => {
                for (key, value) in entries {
                    self.templates(value, &format!("{path}.{}", key.key_text()), scope);
                }
            }
            NodeValue::Seq(items) => {
                for (i, value) in items.iter().enumerate() {
                    self.templates(value, &format!("{path}[{i}]"), scope);
                }
            }
            _ => {}
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Inside preReconcile: sentinel functions allowed (when declared).
    Gate,
    Outside,
}

/// Every box of a CRD written in its entry's `node`, with that node and its path (`base` is
/// the CRD's own path): the CRD's box, then each serve target's.
pub(crate) fn box_nodes<'e>(
    entry: &'e CrdEntry,
    node: &'e Node,
    base: &str,
) -> Vec<(&'e OperatorBox, &'e Node, String)> {
    entry
        .boxes()
        .into_iter()
        .filter_map(|(target, operator_box)| {
            let box_node = match target {
                None => node.get("operatorBox"),
                Some(name) => node
                    .get("serve")
                    .and_then(|s| s.get("target"))
                    .and_then(|t| t.get(name))
                    .and_then(|t| t.get("operatorBox")),
            }?;
            Some((operator_box, box_node, format!("{base}.{}", box_path(target))))
        })
        .collect()
}

/// The `i`-th element of a list node.
pub(crate) fn item(list: Option<&Node>, i: usize) -> Option<&Node> {
    match &list?.value {
        NodeValue::Seq(items) => items.get(i),
        _ => None,
    }
}
