//! `ork migrate`: rewrites a Katalog written in an older schema in the current one. The
//! konductor-era apiVersion and list-shaped `spec.crds`, the flat operatorBox shape and the
//! CRD-level keys that moved (what loading translates silently), and the renamed keys
//! (what loading refuses, naming the new key).
//!
//! Works on one file's YAML tree; `include:`d files are left as they are (each can be
//! migrated on its own), and comments do not survive (the YAML is written anew).

use super::compose::legacy;
use super::de::{self, Problem};
use super::model::KatalogFile;
use super::yaml::{self, Node, NodeValue};
use crate::error::Error;
use crate::model::{API_VERSION, LEGACY_API_VERSION};

/// The migrated file and what was changed, one line each.
#[derive(Debug)]
pub struct Migrated {
    pub yaml: String,
    pub changes: Vec<String>,
}

/// Migrates one Katalog file's text. Fails on YAML it cannot read, or where the older and
/// current shapes both set one key (it cannot choose).
pub fn migrate(text: &str) -> Result<Migrated, Error> {
    let mut root = yaml::parse(text).map_err(|e| Error::Migrate(format!("{}: YAML error: {}", e.pos, e.message)))?;
    let mut changes = Vec::new();
    if root.get("apiVersion").and_then(Node::as_str) == Some(LEGACY_API_VERSION) {
        set_text(&mut root, "apiVersion", API_VERSION);
        changes.push(format!("apiVersion {LEGACY_API_VERSION} → {API_VERSION}"));
    }
    crds_as_map(&mut root, &mut changes).map_err(Error::Migrate)?;
    let (mut problems, mut moves) = (Vec::new(), Vec::new());
    legacy::translate(&mut root, &mut problems, &mut moves);
    if let Some(conflict) = problems.first() {
        return Err(Error::Migrate(located(conflict)));
    }
    changes.extend(moves.iter().map(|w| format!("{}: {}", w.path, w.message)));
    entry_conditions(&mut root, &mut String::new(), false, &mut changes);
    // A renamed key may sit inside a section another rename moved: go until none is left.
    for _ in 0..4 {
        let renames = de::renames::<KatalogFile>(&root);
        if renames.is_empty() {
            break;
        }
        for (path, new) in renames {
            if rename_at(&mut root, &path, new) {
                changes.push(format!("{path} → {new}"));
            }
        }
    }
    let mut yaml = String::new();
    let mut emitter = yaml_rust2::YamlEmitter::new(&mut yaml);
    emitter.multiline_strings(true);
    emitter
        .dump(&to_yaml(&root))
        .map_err(|e| Error::Migrate(format!("writing YAML: {e}")))?;
    // The emitter opens with a document marker a single-document file does not need.
    let yaml = yaml.strip_prefix("---\n").map(str::to_string).unwrap_or(yaml) + "\n";
    Ok(Migrated { yaml, changes })
}

fn located(problem: &Problem) -> String {
    format!("{}: {}: {}", problem.pos, problem.path, problem.message)
}

fn set_text(node: &mut Node, key: &str, text: &str) {
    if let Some(value) = node.get_mut(key) {
        value.value = NodeValue::String(text.to_string());
    }
}

/// `spec.crds: [{name: web, ...}]` → `spec.crds: {web: {...}}`.
fn crds_as_map(root: &mut Node, changes: &mut Vec<String>) -> Result<(), String> {
    let Some(crds) = root.get_mut("spec").and_then(|s| s.get_mut("crds")) else {
        return Ok(());
    };
    let NodeValue::Seq(items) = &mut crds.value else {
        return Ok(());
    };
    let mut entries = Vec::with_capacity(items.len());
    for (index, mut item) in std::mem::take(items).into_iter().enumerate() {
        let name = item
            .remove("name")
            .and_then(|(key, value)| value.as_str().map(|n| Node::string(n, key.pos)))
            .ok_or_else(|| {
                format!(
                    "{}: spec.crds[{index}]: a list entry needs a `name` to become a map key",
                    item.pos
                )
            })?;
        entries.push((name, item));
    }
    crds.value = NodeValue::Map(entries);
    changes.push("spec.crds: a list of entries with name → a map keyed by name".into());
    Ok(())
}

/// `anyOf` → `or` on resource entries (list items under `onCreate`, `onReconcile` or
/// `onDelete`), whose keys are the kind's own and so not seen by the typed renames.
fn entry_conditions(node: &mut Node, path: &mut String, in_hooks: bool, changes: &mut Vec<String>) {
    let len = path.len();
    match &mut node.value {
        NodeValue::Map(entries) => {
            for (key, value) in entries.iter_mut() {
                let key = key.key_text();
                path.push_str(&format!("{}{key}", if path.is_empty() { "" } else { "." }));
                let hooks = in_hooks || ["onCreate", "onReconcile", "onDelete"].contains(&key.as_str());
                entry_conditions(value, path, hooks, changes);
                path.truncate(len);
            }
        }
        NodeValue::Seq(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                path.push_str(&format!("[{i}]"));
                if in_hooks && rename_in(item, "anyOf", "or") {
                    changes.push(format!("{path}.anyOf → or"));
                }
                entry_conditions(item, path, in_hooks, changes);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// Renames the key a dot path (`a.b[2].c.old`) ends in; false when the path is not there.
fn rename_at(root: &mut Node, path: &str, new: &str) -> bool {
    let Some((parent, old)) = path.rsplit_once('.') else {
        return rename_in(root, path, new);
    };
    let mut node = root;
    for segment in parent.split('.') {
        let mut parts = segment.split('[');
        let key = parts.next().unwrap_or_default();
        let Some(next) = node.get_mut(key) else { return false };
        node = next;
        for index in parts {
            let Some(i) = index.trim_end_matches(']').parse::<usize>().ok() else {
                return false;
            };
            let NodeValue::Seq(items) = &mut node.value else {
                return false;
            };
            let Some(item) = items.get_mut(i) else { return false };
            node = item;
        }
    }
    rename_in(node, old, new)
}

fn rename_in(node: &mut Node, old: &str, new: &str) -> bool {
    if node.get(new).is_some() {
        return false; // both written: loading reports it; never drop a value here
    }
    let NodeValue::Map(entries) = &mut node.value else {
        return false;
    };
    match entries.iter_mut().find(|(k, _)| k.key_text() == old) {
        Some((key, _)) => {
            key.value = NodeValue::String(new.to_string());
            true
        }
        None => false,
    }
}

fn to_yaml(node: &Node) -> yaml_rust2::Yaml {
    use yaml_rust2::Yaml;
    match &node.value {
        NodeValue::Null => Yaml::Null,
        NodeValue::Bool(b) => Yaml::Boolean(*b),
        NodeValue::Int(i) => Yaml::Integer(*i),
        NodeValue::Float(f) => Yaml::Real(f.to_string()),
        NodeValue::String(s) => Yaml::String(s.clone()),
        NodeValue::Seq(items) => Yaml::Array(items.iter().map(to_yaml).collect()),
        NodeValue::Map(entries) => {
            let mut hash = yaml_rust2::yaml::Hash::new();
            for (key, value) in entries {
                hash.insert(Yaml::String(key.key_text()), to_yaml(value));
            }
            Yaml::Hash(hash)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = r#"apiVersion: orkestra.konductor.io/v1Alpha
kind: Katalog
metadata: {name: shop}
spec:
  crds:
    - name: website
      apiTypes: {group: demo.io, version: v1, kind: Website}
      workers: 2
      queue: {default: true, maxQueueDepth: 200}
      validation:
        - {field: spec.image, operator: exists, action: deny, message: an image is required}
      reconciler:
        default: true
        onCreate:
          deployments:
            - image: "{{ .spec.image }}"
              reconcile: true
              anyOf:
                - {field: spec.tier, equals: gold}
        hooks:
          component: ./hooks.wasm
          resources: [{kind: ConfigMap}]
      operatorBox:
        preReconcile:
          reconcileGate:
            anyOf:
              - {field: spec.paused, equals: "false"}
"#;

    #[test]
    fn an_older_katalog_comes_out_in_the_current_schema_and_loads_clean() {
        let migrated = migrate(OLD).unwrap();
        let changes = migrated.changes.join("\n");
        for said in [
            "apiVersion orkestra.konductor.io/v1Alpha → orkestra.orkspace.io/v1",
            "a map keyed by name",
            "reconciler → operatorBox",
            "workers → operatorBox.reconcile.workers",
            "validation: [...] → admission.validation.rules",
            "operatorBox.reconcile.hooks.resources → managedResources",
            "operatorBox.preReconcile.reconcileGate.anyOf → or",
            "onCreate.deployments[0].anyOf → or",
            "reconcile.queue.maxQueueDepth → maxDepth",
            "reconcile.queue.default → shared",
        ] {
            assert!(changes.contains(said), "{said} in\n{changes}");
        }
        let node = yaml::parse(&migrated.yaml).unwrap();
        let entry = node
            .get("spec")
            .and_then(|s| s.get("crds"))
            .and_then(|c| c.get("website"))
            .unwrap();
        let json = entry.to_json();
        assert_eq!(json["operatorBox"]["reconcile"]["workers"], 2);
        assert_eq!(json["admission"]["validation"]["rules"][0]["field"], "spec.image");
        assert_eq!(
            json["operatorBox"]["reconcile"]["hooks"]["managedResources"][0]["kind"],
            "ConfigMap"
        );
        assert_eq!(
            json["operatorBox"]["reconcile"]["onCreate"]["deployments"][0]["image"],
            "{{ .spec.image }}"
        );
        assert_eq!(
            json["operatorBox"]["reconcile"]["onCreate"]["deployments"][0]["or"][0]["field"],
            "spec.tier"
        );
        // What it wrote reads back with no error and no warning about older forms (the
        // component file is not there, which only the component check would mind).
        let problems = de::read::<KatalogFile>(&node, "").unwrap().1;
        assert!(problems.is_empty(), "{problems:?}");
        let again = migrate(&migrated.yaml).unwrap();
        assert!(
            again.changes.is_empty(),
            "migrating twice changes nothing: {:?}",
            again.changes
        );
    }

    #[test]
    fn a_list_entry_without_a_name_or_a_key_set_twice_is_refused() {
        let nameless =
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    - apiTypes: {kind: A}\n";
        assert!(migrate(nameless).unwrap_err().to_string().contains("needs a `name`"));
        let twice = "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    a:\n      workers: 2\n      operatorBox: {reconcile: {workers: 3}}\n";
        assert!(migrate(twice).unwrap_err().to_string().contains("set in both"));
    }
}
