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

    /// Compiles every string holding `{{` under `node`; a sentinel function is checked
    /// against what `scope` allows: a declared sentinel in a stage that runs on the CR's
    /// events, none where there is no such event (the scope says why).
    pub(crate) fn templates(&mut self, node: &Node, path: &str, scope: Scope<'_>) {
        match &node.value {
            NodeValue::String(text) if text.contains("{{") => match crate::gather::template(text, self.functions) {
                Ok(template) => {
                    let sentinels = template
                        .functions_called()
                        .into_iter()
                        .filter(|(_, func)| matches!(func, Func::Sentinel(_)));
                    for (name, _) in sentinels {
                        let refused = match scope {
                            Scope::Event(declared) if declared.contains(&name) => continue,
                            Scope::Event(_) => {
                                format!("sentinel \"{name}\" is used but not declared in preReconcile.sentinels")
                            }
                            Scope::NoEvent(why) => format!("sentinel \"{name}\" is not available here: {why}"),
                        };
                        self.error(path, node.pos, refused);
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

/// What a template may ask of the event behind a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope<'d> {
    /// A stage that runs on the CR's own events (its gates, its reconcile, what it emits):
    /// the sentinels declared in `preReconcile.sentinels` may be called.
    Event(&'d std::collections::BTreeSet<String>),
    /// A stage with no such event, and why.
    NoEvent(&'static str),
}

/// Why each stage without a CR event refuses sentinels.
pub(crate) mod no_event {
    pub const ADMISSION: &str =
        "admission rules run in the API server's admission webhook too, where no watch event exists";
    pub const AUTOSCALE: &str = "runtime settings (autoscale conditions among them) are evaluated on a timer over the CRD's figures, not on an event";
    pub const OBSERVE: &str =
        "observe entries are evaluated on the watched object's or Event's own change, which has no sentinels of the CR";
    pub const LABELS: &str = "CRD labels and annotations are kept on the CR and compared on every run; a value that follows the event would rewrite them on each one";
    pub const NOTES: &str = "a note is shared by every stage, some with no event; call the sentinel where the note is used and pass its value in";
    pub const SERVE: &str = "serve settings are evaluated by the gateway for a caller's request, before any CR exists";
    pub const OTHER: &str = "this part of the box is not evaluated on an event";
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
