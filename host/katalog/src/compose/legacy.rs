//! Translation of the flat operatorBox shape (and the CRD-level keys that moved) to the
//! grouped shape, on the node tree, before deserialization. Loading translates silently:
//! upstream's own current examples still write boxes flat, so it is a form, not a mistake.
//! `ork migrate` lists what moved (one line per CRD). A key set in both shapes is an error.

use crate::de::Problem;
use crate::yaml::{Node, NodeValue};

/// CRD-entry keys that moved: (old key, new path relative to the CRD entry).
const CRD_MOVES: &[(&str, &[&str])] = &[
    // The konductor-era CRD entry held the whole (flat) operator box as `reconciler`.
    ("reconciler", &["operatorBox"]),
    ("validation", &["admission", "validation"]),
    ("mutation", &["admission", "mutation"]),
    ("conversion", &["admission", "conversion"]),
    ("webhooks", &["admission", "webhooks"]),
    ("workers", &["operatorBox", "reconcile", "workers"]),
    ("resync", &["operatorBox", "reconcile", "resync"]),
    ("queue", &["operatorBox", "reconcile", "queue"]),
    ("normalize", &["operatorBox", "reconcile", "normalize"]),
    ("imports", &["operatorBox", "reconcile", "imports"]),
    ("forceConflict", &["operatorBox", "reconcile", "forceConflict"]),
    (
        "restrictedNamespaces",
        &["operatorBox", "runtime", "restrictedNamespaces"],
    ),
    ("allowedNamespaces", &["operatorBox", "runtime", "allowedNamespaces"]),
    ("ignoreStatusPatch", &["operatorBox", "runtime", "ignoreStatusPatch"]),
    (
        "ignoreObservedGeneration",
        &["operatorBox", "runtime", "ignoreObservedGeneration"],
    ),
    ("removeFinalizers", &["operatorBox", "runtime", "removeFinalizers"]),
];

/// operatorBox keys that moved: (old key, new path relative to the box). `reconciler`
/// merges into `reconcile`.
const BOX_MOVES: &[(&str, &[&str])] = &[
    ("reconciler", &["reconcile"]),
    ("default", &["reconcile", "default"]),
    ("hooks", &["reconcile", "hooks"]),
    ("constructor", &["reconcile", "constructor"]),
    ("profile", &["reconcile", "profile"]),
    ("workers", &["reconcile", "workers"]),
    ("resync", &["reconcile", "resync"]),
    ("queue", &["reconcile", "queue"]),
    ("requeue", &["reconcile", "requeue"]),
    ("onCreate", &["reconcile", "onCreate"]),
    ("onReconcile", &["reconcile", "onReconcile"]),
    ("onDelete", &["reconcile", "onDelete"]),
    ("normalize", &["reconcile", "normalize"]),
    ("imports", &["reconcile", "imports"]),
    ("forceConflict", &["reconcile", "forceConflict"]),
    ("providers", &["reconcile", "providers"]),
    ("status", &["emit", "status"]),
    ("cross", &["observe", "cross"]),
    ("watch", &["observe", "watch"]),
    ("finalizers", &["runtime", "finalizers"]),
    ("removeFinalizers", &["runtime", "removeFinalizers"]),
    ("deletionProtection", &["runtime", "deletionProtection"]),
    ("restrictedNamespaces", &["runtime", "restrictedNamespaces"]),
    ("allowedNamespaces", &["runtime", "allowedNamespaces"]),
    ("ignoreStatusPatch", &["runtime", "ignoreStatusPatch"]),
    ("ignoreObservedGeneration", &["runtime", "ignoreObservedGeneration"]),
    ("autoscale", &["runtime", "autoscale"]),
    ("rollback", &["runtime", "rollback"]),
    ("rollBackOnError", &["runtime", "rollBackOnError"]),
    ("cleanup", &["runtime", "cleanup"]),
    // A box-level gate in the flat shape guarded reconciliation itself.
    ("when", &["preReconcile", "reconcileGate", "when"]),
    ("or", &["preReconcile", "reconcileGate", "or"]),
];

/// preReconcile keys that moved: a gate written straight under `preReconcile` is the
/// reconcile gate.
const PRE_RECONCILE_MOVES: &[(&str, &[&str])] =
    &[("when", &["reconcileGate", "when"]), ("or", &["reconcileGate", "or"])];

/// The older admission sections were the rule lists themselves: `admission.validation: [...]`
/// (and `mutation`) under `node` becomes `{rules: [...]}`. Returns the sections rewritten.
pub fn rule_lists_as_maps(node: &mut Node) -> Vec<&'static str> {
    let mut rewritten = Vec::new();
    for section in ["validation", "mutation"] {
        if let Some(rules) = node
            .get_mut("admission")
            .and_then(|a| a.get_mut(section))
            .filter(|r| matches!(r.value, NodeValue::Seq(_)))
        {
            let pos = rules.pos;
            let list = std::mem::replace(rules, Node::new(NodeValue::Null, pos));
            *rules = Node::new(NodeValue::Map(vec![(Node::string("rules", pos), list)]), pos);
            rewritten.push(section);
        }
    }
    rewritten
}

/// Translates every CRD entry under `spec.crds` of a Katalog file; `moves` gets one line per
/// CRD that was written flat.
pub fn translate(root: &mut Node, problems: &mut Vec<Problem>, moves: &mut Vec<Problem>) {
    let Some(crds) = root.get_mut("spec").and_then(|s| s.get_mut("crds")) else {
        return;
    };
    let NodeValue::Map(entries) = &mut crds.value else {
        if matches!(crds.value, NodeValue::Seq(_)) {
            problems.push(Problem {
                path: "spec.crds".into(),
                pos: crds.pos,
                message: "is a list of entries with `name:` (the konductor v1Alpha shape); it is a map keyed by CRD name now: `ork migrate -f FILE` rewrites it".into(),
            });
        }
        return;
    };
    for (name, entry) in entries.iter_mut() {
        let base = format!("spec.crds.{}", name.key_text());
        let mut moved = Vec::new();
        apply(entry, CRD_MOVES, &base, &mut moved, problems);
        for section in rule_lists_as_maps(entry) {
            moved.push(format!("{section}: [...] → admission.{section}.rules"));
        }
        if let Some(operator_box) = entry.get_mut("operatorBox") {
            apply(
                operator_box,
                BOX_MOVES,
                &format!("{base}.operatorBox"),
                &mut moved,
                problems,
            );
            if let Some(pre) = operator_box.get_mut("preReconcile") {
                let path = format!("{base}.operatorBox.preReconcile");
                apply(pre, PRE_RECONCILE_MOVES, &path, &mut moved, problems);
            }
        }
        if let Some(NodeValue::Map(targets)) = entry
            .get_mut("serve")
            .and_then(|s| s.get_mut("target"))
            .map(|t| &mut t.value)
        {
            for (target, value) in targets.iter_mut() {
                if let Some(operator_box) = value.get_mut("operatorBox") {
                    let path = format!("{base}.serve.target.{}.operatorBox", target.key_text());
                    apply(operator_box, BOX_MOVES, &path, &mut moved, problems);
                }
            }
        }
        if !moved.is_empty() {
            moves.push(Problem {
                path: base,
                pos: name.pos,
                message: format!("written in the flat shape; grouped: {}", moved.join(", ")),
            });
        }
    }
}

fn apply(node: &mut Node, moves: &[(&str, &[&str])], base: &str, moved: &mut Vec<String>, problems: &mut Vec<Problem>) {
    for (old, new_path) in moves {
        let Some((key, value)) = node.remove(old) else { continue };
        let target = format!("{base}.{}", new_path.join("."));
        moved.push(format!("{old} → {}", new_path.join(".")));
        if let Err(conflict) = place(node, new_path, key, value) {
            problems.push(Problem {
                path: format!("{base}.{old}"),
                pos: conflict,
                message: format!("set in both the older shape (`{old}`) and the grouped shape (`{target}`); keep one"),
            });
        }
    }
}

/// Puts `value` at `path` under `node`, creating maps on the way. A map landing on a map
/// merges key by key; any key present on both sides is a conflict (its position returned).
fn place(node: &mut Node, path: &[&str], key: Node, value: Node) -> Result<(), crate::yaml::Pos> {
    let Some((last, parents)) = path.split_last() else {
        return Ok(());
    };
    let mut current = node;
    for segment in parents {
        if current.get(segment).is_none() {
            let new_key = Node::string(*segment, key.pos);
            current.insert(new_key, Node::new(NodeValue::Map(vec![]), key.pos));
        }
        current = match current.get_mut(segment) {
            Some(next) if matches!(next.value, NodeValue::Map(_)) => next,
            Some(next) => return Err(next.pos),
            None => return Ok(()),
        };
    }
    match current.get_mut(last) {
        None => {
            let new_key = Node::string(*last, key.pos);
            current.insert(new_key, value);
            Ok(())
        }
        Some(existing) => match (&mut existing.value, value.value) {
            (NodeValue::Map(existing_entries), NodeValue::Map(new_entries)) => {
                for (k, v) in new_entries {
                    if let Some((clash, _)) = existing_entries.iter().find(|(e, _)| e.key_text() == k.key_text()) {
                        return Err(clash.pos);
                    }
                    existing_entries.push((k, v));
                }
                Ok(())
            }
            _ => Err(existing.pos),
        },
    }
}
