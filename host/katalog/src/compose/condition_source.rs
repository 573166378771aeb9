//! Upstream's condition `source: {host, crd | endpoint}`: a condition that reads
//! `cross.<name>.metrics.*` of a CRD in another runtime. On the node tree, before
//! deserialization, each such condition of the reconcile stage (blocks, entries, `emit`)
//! becomes what it stands for: a cross read of that runtime's metrics (`observe.cross`,
//! `as: <name>`, `source.protocol: metrics`), made with the reconcile's other cross reads,
//! and the condition reads its field from it. A gate runs before the cross reads and
//! autoscale runs on a timer, so a `source` there is refused (by the unhosted check), saying
//! what to write instead.

use crate::de::Problem;
use crate::yaml::{Node, NodeValue, Pos};

/// The parts of a box whose conditions run in the reconcile, after its cross reads.
const RECONCILE_STAGE: [&str; 2] = ["reconcile", "emit"];

/// Rewrites the conditions with a `source` in every box of the Katalog root `node`.
pub fn translate(node: &mut Node, problems: &mut Vec<Problem>) {
    let Some(crds) = node.get_mut("spec").and_then(|s| s.get_mut("crds")) else {
        return;
    };
    let NodeValue::Map(entries) = &mut crds.value else {
        return;
    };
    for (name, entry) in entries.iter_mut() {
        let path = format!("spec.crds.{}", name.key_text());
        if let Some(operator_box) = entry.get_mut("operatorBox") {
            in_box(operator_box, &format!("{path}.operatorBox"), problems);
        }
        let targets = entry.get_mut("serve").and_then(|s| s.get_mut("target"));
        if let Some(Node {
            value: NodeValue::Map(targets),
            ..
        }) = targets
        {
            for (target, value) in targets.iter_mut() {
                if let Some(operator_box) = value.get_mut("operatorBox") {
                    let at = format!("{path}.serve.target.{}.operatorBox", target.key_text());
                    in_box(operator_box, &at, problems);
                }
            }
        }
    }
}

/// One box: its reconcile-stage conditions' sources taken out, the reads they stand for
/// added to `observe.cross` (one per name).
fn in_box(operator_box: &mut Node, path: &str, problems: &mut Vec<Problem>) {
    let mut reads: Vec<(String, Node)> = Vec::new();
    for stage in RECONCILE_STAGE {
        if let Some(part) = operator_box.get_mut(stage) {
            take_sources(part, &format!("{path}.{stage}"), &mut reads, problems);
        }
    }
    if reads.is_empty() {
        return;
    }
    let pos = operator_box.pos;
    if operator_box.get("observe").is_none() {
        operator_box.insert(Node::string("observe", pos), Node::new(NodeValue::Map(Vec::new()), pos));
    }
    let Some(observe) = operator_box.get_mut("observe") else {
        return;
    };
    if observe.get("cross").is_none() {
        observe.insert(Node::string("cross", pos), Node::new(NodeValue::Seq(Vec::new()), pos));
    }
    let Some(Node {
        value: NodeValue::Seq(cross),
        ..
    }) = observe.get_mut("cross")
    else {
        return;
    };
    for (name, read) in reads {
        let taken = cross
            .iter()
            .any(|c| c.get("as").or(c.get("crd")).and_then(Node::as_str) == Some(&name));
        if taken {
            problems.push(Problem {
                path: format!("{path}.observe.cross"),
                pos: read.pos,
                message: format!(
                    "a condition's source reads cross.{name}, which observe.cross already reads: test that read's fields and drop the source"
                ),
            });
            continue;
        }
        cross.push(read);
    }
}

/// Every list of conditions (`when`, `or`) under `node`: a condition with `source` loses
/// it to `reads`.
fn take_sources(node: &mut Node, path: &str, reads: &mut Vec<(String, Node)>, problems: &mut Vec<Problem>) {
    match &mut node.value {
        NodeValue::Seq(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                take_sources(item, &format!("{path}[{i}]"), reads, problems);
            }
        }
        NodeValue::Map(entries) => {
            for (key, value) in entries.iter_mut() {
                let at = format!("{path}.{}", key.key_text());
                match (key.key_text().as_str(), &mut value.value) {
                    ("when" | "or", NodeValue::Seq(conditions)) => {
                        for (i, condition) in conditions.iter_mut().enumerate() {
                            take_source(condition, &format!("{at}[{i}]"), reads, problems);
                        }
                    }
                    _ => take_sources(value, &at, reads, problems),
                }
            }
        }
        _ => {}
    }
}

/// One condition's `source`, if it has one, taken out into `reads` (once per name).
fn take_source(condition: &mut Node, path: &str, reads: &mut Vec<(String, Node)>, problems: &mut Vec<Problem>) {
    let Some((_, source)) = condition.remove("source") else {
        return;
    };
    let field = condition.get("field").and_then(Node::as_str).unwrap_or_default();
    match read_for(field, &source) {
        Ok((name, read)) if !reads.iter().any(|(n, _)| *n == name) => reads.push((name, read)),
        Ok(_) => {}
        Err(message) => problems.push(Problem {
            path: format!("{path}.source"),
            pos: source.pos,
            message,
        }),
    }
}

/// The cross read a condition's `source` stands for, named by the condition's field
/// (`cross.<name>.metrics...`).
fn read_for(field: &str, source: &Node) -> Result<(String, Node), String> {
    let name = field
        .trim_start_matches('.')
        .strip_prefix("cross.")
        .and_then(|rest| rest.split_once(".metrics").map(|(name, _)| name))
        .filter(|name| !name.is_empty() && !name.contains('.'))
        .ok_or_else(|| {
            format!("a condition's source feeds cross.<name>.metrics: its field must read there, not {field:?}")
        })?;
    let pos = source.pos;
    let text = |key: &str| source.get(key).and_then(Node::as_str).map(str::to_string);
    let crd = text("crd").unwrap_or_else(|| name.to_string());
    let mut remote = vec![(Node::string("protocol", pos), Node::string("metrics", pos))];
    match (text("host"), text("endpoint")) {
        (_, Some(endpoint)) => remote.push((Node::string("endpoint", pos), Node::string(endpoint, pos))),
        (Some(host), None) => remote.push((Node::string("host", pos), Node::string(host, pos))),
        (None, None) => {
            return Err("a condition's source names where the other runtime is: host (with crd) or endpoint".into());
        }
    }
    for key in ["auth", "cacheFor"] {
        if let Some(value) = source.get(key) {
            remote.push((Node::string(key, pos), value.clone()));
        }
    }
    let read = map(
        vec![
            (Node::string("crd", pos), Node::string(crd, pos)),
            (Node::string("as", pos), Node::string(name, pos)),
            (Node::string("source", pos), map(remote, pos)),
        ],
        pos,
    );
    Ok((name.to_string(), read))
}

fn map(entries: Vec<(Node, Node)>, pos: Pos) -> Node {
    Node::new(NodeValue::Map(entries), pos)
}
