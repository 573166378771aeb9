//! Keys upstream defines whose effect this runtime does not provide. Each is refused by
//! name, with what to do instead, rather than loaded and silently ignored: a Katalog that
//! expects a notification, a rollback or a remote reconciler must not seem to have one.

use crate::check::Checker;
use crate::yaml::{Node, NodeValue};

/// Why a key is refused; `when_true` refuses only `key: true` (`false` is what runs here).
struct Unhosted {
    /// The path's last segments: `*` matches any one, `a|b` either.
    ends: &'static [&'static str],
    when_true: bool,
    why: &'static str,
}

const ROLLBACK: &str = "rollback is not implemented (upstream's is switched off as in development too); remove it";
const PROVIDERS: &str =
    "provider runners (git, docker) are not hosted by this runtime: do that work in a Wasm component";

const UNHOSTED: &[Unhosted] = &[
    Unhosted {
        ends: &["operatorBox", "reconcile", "remote"],
        when_true: false,
        why: "a remote (HTTP) reconciler is not hosted by this runtime: write the reconciler as a Wasm component (`reconcile.constructor`), which calls other services through its grants",
    },
    Unhosted {
        ends: &["operatorBox", "runtime", "rollback"],
        when_true: false,
        why: ROLLBACK,
    },
    Unhosted {
        ends: &["operatorBox", "runtime", "rollBackOnError"],
        when_true: true,
        why: ROLLBACK,
    },
    Unhosted {
        ends: &["operatorBox", "runtime", "cleanup"],
        when_true: false,
        why: "runtime cleanup policies are not implemented: children owned by a CR go with it (owner references), onDelete templates run before its finalizer is removed",
    },
    Unhosted {
        ends: &["operatorBox", "reconcile", "providers"],
        when_true: false,
        why: PROVIDERS,
    },
    Unhosted {
        ends: &["when|or", "*", "notify"],
        when_true: false,
        why: "notifications (SMTP, Slack) are not sent by this runtime: declare an Event (`emit.events`) and route Events with your alerting",
    },
    Unhosted {
        ends: &["when|or", "*", "source"],
        when_true: false,
        why: "a condition's source is read with the reconcile's cross reads, and here there are none (a gate runs before them, autoscale on a timer): test it in the reconcile (a block's or entry's when, a status field), or read the other runtime with `observe.cross` and `source:` and test `cross.<as>.metrics...` there",
    },
];

/// Top-level sections refused whole.
const UNHOSTED_SECTIONS: &[(&str, &str)] = &[
    (
        "notification",
        "notification teams (SMTP, Slack) are not used by this runtime: it sends no notifications; declare Events (`emit.events`) and route them with your alerting",
    ),
    ("providers", PROVIDERS),
];

impl Checker<'_> {
    /// Refuses every unhosted key of one Katalog file.
    pub(super) fn unhosted(&mut self, root: &Node) {
        for (key, value) in root.entries().unwrap_or_default() {
            let name = key.key_text();
            if let Some((_, why)) = UNHOSTED_SECTIONS.iter().find(|(section, _)| *section == name) {
                self.error(name.clone(), key.pos, *why);
            }
            if name == "spec" {
                self.walk_unhosted(value, &mut vec![name]);
            }
        }
    }

    fn walk_unhosted(&mut self, node: &Node, path: &mut Vec<String>) {
        match &node.value {
            NodeValue::Map(entries) => {
                for (key, value) in entries {
                    path.push(key.key_text());
                    if let Some(rule) = UNHOSTED.iter().find(|rule| ends_with(path, rule.ends))
                        && (!rule.when_true || value.value == NodeValue::Bool(true))
                    {
                        self.error(join(path), key.pos, rule.why);
                    }
                    self.walk_unhosted(value, path);
                    path.pop();
                }
            }
            NodeValue::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(format!("[{i}]"));
                    self.walk_unhosted(item, path);
                    path.pop();
                }
            }
            _ => {}
        }
    }
}

fn ends_with(path: &[String], ends: &[&str]) -> bool {
    path.len() >= ends.len()
        && path[path.len() - ends.len()..]
            .iter()
            .zip(ends)
            .all(|(segment, want)| *want == "*" || want.split('|').any(|w| w == segment))
}

/// `spec.crds.web.operatorBox.reconcile.remote`, `when[0].notify`.
fn join(path: &[String]) -> String {
    let mut text = String::new();
    for segment in path {
        if !text.is_empty() && !segment.starts_with('[') {
            text.push('.');
        }
        text.push_str(segment);
    }
    text
}
