//! Whose child an object is. An object in the cluster belongs to a custom resource only by
//! evidence its writer cannot forge: a controller owner reference carrying the CR's UID
//! (children in the CR's own namespace), or the owner labels the host stamps with the CR's
//! UID and kind (cluster-scoped children, children in other namespaces, and objects that must
//! outlive the CR). A name, a name label or anything the CR itself says (its annotations) is
//! never enough to write, adopt or delete an object. Also the field managers that keep each
//! tenant's writes apart.
//!
//! Pure: no kube or wasmtime imports.

use serde_json::{Value, json};

use orkestra_expr::labels::{MANAGED_LABEL, OWNER_KIND_LABEL, OWNER_NAME_LABEL, OWNER_UID_LABEL};

/// The field manager every child used to share; objects it still manages are moved to the
/// manager of their CRD or component on their first reconcile.
pub const LEGACY_FIELD_MANAGER: &str = "orkestra";

/// The Kubernetes limit on a field manager's name.
const FIELD_MANAGER_LIMIT: usize = 128;
/// The Kubernetes limit on a label value.
const LABEL_VALUE_LIMIT: usize = 63;

/// The custom resource a child belongs to, as the host knows it from the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub uid: &'a str,
}

impl<'a> Owner<'a> {
    /// The owner described by a custom resource as read from the API server; `None` when
    /// it has no UID (it was never stored), so nothing can be proven to be its.
    pub fn of(cr: &'a Value) -> Option<Self> {
        let text = |v: &'a Value| v.as_str().filter(|s| !s.is_empty());
        Some(Self {
            api_version: text(&cr["apiVersion"])?,
            kind: text(&cr["kind"])?,
            name: text(&cr["metadata"]["name"])?,
            namespace: text(&cr["metadata"]["namespace"]),
            uid: text(&cr["metadata"]["uid"])?,
        })
    }

    /// `Kind.group` (`Kind` for the core group), fit for a label value.
    pub fn kind_label(&self) -> String {
        let group = self.api_version.rsplit_once('/').map_or("", |(group, _)| group);
        kind_label(self.kind, group)
    }
}

/// What the cluster says about an existing object and a would-be owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Controlled by this CR, or labelled with its UID and kind.
    Ours,
    /// Labelled by the older name-only scheme for a CR of this name, with no UID evidence
    /// either way. It may be adopted by applying to it (which stamps the UID), never deleted
    /// on this evidence alone.
    Legacy,
    /// Someone else's; the text says whose ("is controlled by ..."), for the NotOwned message.
    NotOurs(String),
}

/// Whether `live` belongs to `owner`.
pub fn claim(live: &Value, owner: &Owner<'_>) -> Claim {
    let metadata = &live["metadata"];
    let controller = metadata["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["controller"] == true);
    if let Some(controller) = controller {
        return if controller["uid"].as_str() == Some(owner.uid) {
            Claim::Ours
        } else {
            Claim::NotOurs(format!(
                "is controlled by {} {}, not this {} {}",
                short(controller["kind"].as_str().unwrap_or("?")),
                short(controller["name"].as_str().unwrap_or("?")),
                owner.kind,
                owner.name
            ))
        };
    }
    let labels = &metadata["labels"];
    match labels[OWNER_UID_LABEL].as_str() {
        Some(uid) if uid == owner.uid && labels[OWNER_KIND_LABEL].as_str() == Some(&owner.kind_label()) => Claim::Ours,
        Some(_) => Claim::NotOurs(format!(
            "belongs to another custom resource, not this {} {}",
            owner.kind, owner.name
        )),
        None if labels[MANAGED_LABEL] == "true" && labels[OWNER_NAME_LABEL].as_str() == Some(owner.name) => {
            Claim::Legacy
        }
        None => Claim::NotOurs(format!("was not created for this {} {}", owner.kind, owner.name)),
    }
}

/// Marks `object` as `owner`'s child: the managed label, the name label (upstream tooling
/// selects on it), the UID and kind labels, and, with `controller_ref`, the controller owner
/// reference (only possible in the owner's namespace). Whatever ownership the object claimed
/// before (labels, references from a template or a guest) is replaced. Anything but a JSON
/// object is left as it is (the API server refuses it).
pub fn stamp(object: &mut Value, owner: &Owner<'_>, controller_ref: bool) {
    let Some(object) = object.as_object_mut() else {
        return;
    };
    let metadata = object.entry("metadata").or_insert_with(|| json!({}));
    if !metadata.is_object() {
        *metadata = json!({});
    }
    let Value::Object(metadata) = metadata else {
        return;
    };
    let labels = metadata.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    labels[MANAGED_LABEL] = json!("true");
    labels[OWNER_NAME_LABEL] = json!(label_value(owner.name));
    labels[OWNER_UID_LABEL] = json!(owner.uid);
    labels[OWNER_KIND_LABEL] = json!(owner.kind_label());
    if controller_ref {
        metadata.insert(
            "ownerReferences".into(),
            json!([{
                "apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name, "uid": owner.uid,
                "controller": true, "blockOwnerDeletion": true,
            }]),
        );
    } else {
        metadata.remove("ownerReferences");
    }
}

/// The labels [`stamp`] adds, as a merge patch: adopting a legacy child without rewriting
/// anything else of it.
pub fn adoption_patch(owner: &Owner<'_>) -> Value {
    json!({"metadata": {"labels": {
        OWNER_UID_LABEL: owner.uid,
        OWNER_KIND_LABEL: owner.kind_label(),
    }}})
}

/// `live`'s managedFields with the shared legacy manager's entries handed to `manager`, or
/// `None` when it has none. An entry `manager` already has makes the legacy one redundant,
/// so that one is dropped instead.
pub fn migrated_managers(live: &Value, manager: &str) -> Option<Vec<Value>> {
    let entries = live["metadata"]["managedFields"].as_array()?;
    let legacy = |e: &Value| e["manager"] == LEGACY_FIELD_MANAGER && e["operation"] == "Apply";
    if !entries.iter().any(legacy) {
        return None;
    }
    let taken = entries
        .iter()
        .any(|e| e["manager"] == manager && e["operation"] == "Apply");
    Some(
        entries
            .iter()
            .filter(|e| !(taken && legacy(e)))
            .map(|e| {
                let mut e = e.clone();
                if legacy(&e) {
                    e["manager"] = json!(manager);
                }
                e
            })
            .collect(),
    )
}

/// The field manager of one tenant's writes: `prefix/crd` or `prefix/crd/target`, where
/// `crd` is the CRD's cluster-wide name (`plural.group`). Cut to the Kubernetes limit with a
/// digest of the whole, so two long names never collide.
pub fn field_manager(prefix: &str, crd: &str, target: Option<&str>) -> String {
    let mut name = format!("{prefix}/{crd}");
    if let Some(target) = target {
        name.push('/');
        name.push_str(target);
    }
    if name.len() <= FIELD_MANAGER_LIMIT {
        return name;
    }
    let digest = fnv1a(&name);
    format!(
        "{}-{digest:016x}",
        orkestra_expr::text::cut(&name, FIELD_MANAGER_LIMIT - 17)
    )
}

/// The owner-kind label value of CRs of `kind` in `group`: `Kind.group` (`Kind` for the core
/// group), cut to a label value. A watch selects one CRD's children by it.
pub fn kind_label(kind: &str, group: &str) -> String {
    if group.is_empty() {
        label_value(kind)
    } else {
        label_value(&format!("{kind}.{group}"))
    }
}

/// A label value: at most 63 characters, cut so it ends alphanumeric.
fn label_value(text: &str) -> String {
    let cut: String = text.chars().take(LABEL_VALUE_LIMIT).collect();
    cut.trim_end_matches(|c: char| !c.is_ascii_alphanumeric()).to_string()
}

/// A name from the cluster, bounded for a message.
fn short(text: &str) -> &str {
    orkestra_expr::text::cut(text, 253)
}

/// FNV-1a: a stable digest for cutting names (not a security boundary: both names are
/// the platform's own).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cr(uid: &str) -> Value {
        json!({"apiVersion": "demo.io/v1", "kind": "Site", "metadata": {"name": "t1", "namespace": "team-a", "uid": uid}})
    }

    fn child(metadata: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})
    }

    #[test]
    fn a_controller_reference_decides_before_any_label() {
        let ours = cr("uid-1");
        let owner = Owner::of(&ours).unwrap();
        let controlled = |uid: &str| {
            child(
                json!({"name": "t1-t", "labels": {OWNER_NAME_LABEL: "t1", MANAGED_LABEL: "true", OWNER_UID_LABEL: "uid-1"},
                "ownerReferences": [{"kind": "Other", "name": "t1", "uid": uid, "controller": true}]}),
            )
        };
        assert_eq!(claim(&controlled("uid-1"), &owner), Claim::Ours);
        assert_eq!(
            claim(&controlled("uid-2"), &owner),
            Claim::NotOurs("is controlled by Other t1, not this Site t1".into()),
            "a same-named CR of another kind, even with our labels copied"
        );
    }

    #[test]
    fn without_a_controller_the_uid_and_kind_labels_decide() {
        let ours = cr("uid-1");
        let owner = Owner::of(&ours).unwrap();
        let mut stamped = child(json!({"name": "x"}));
        stamp(&mut stamped, &owner, false);
        assert_eq!(claim(&stamped, &owner), Claim::Ours);
        let other = cr("uid-2");
        assert!(matches!(
            claim(&stamped, &Owner::of(&other).unwrap()),
            Claim::NotOurs(_)
        ));
        let mut other_kind = stamped.clone();
        other_kind["metadata"]["labels"][OWNER_KIND_LABEL] = json!("Other.demo.io");
        assert!(
            matches!(claim(&other_kind, &owner), Claim::NotOurs(_)),
            "the kind must match as well"
        );
    }

    #[test]
    fn the_name_label_alone_is_legacy_at_best_and_nothing_is_not_ours() {
        let ours = cr("uid-1");
        let owner = Owner::of(&ours).unwrap();
        let legacy = child(json!({"name": "x", "labels": {OWNER_NAME_LABEL: "t1", MANAGED_LABEL: "true"}}));
        assert_eq!(claim(&legacy, &owner), Claim::Legacy);
        let named_only = child(json!({"name": "x", "labels": {OWNER_NAME_LABEL: "t1"}}));
        assert!(matches!(claim(&named_only, &owner), Claim::NotOurs(_)));
        assert!(matches!(claim(&child(json!({"name": "x"})), &owner), Claim::NotOurs(_)));
    }

    #[test]
    fn stamping_replaces_whatever_ownership_the_object_claimed() {
        let ours = cr("uid-1");
        let owner = Owner::of(&ours).unwrap();
        let mut forged = child(json!({"name": "x", "labels": {OWNER_UID_LABEL: "victim", "app": "a"},
            "ownerReferences": [{"kind": "Namespace", "name": "kube-system", "uid": "ns", "controller": true}]}));
        stamp(&mut forged, &owner, true);
        let labels = &forged["metadata"]["labels"];
        assert_eq!(labels[OWNER_UID_LABEL], "uid-1");
        assert_eq!(labels[OWNER_KIND_LABEL], "Site.demo.io");
        assert_eq!(labels[OWNER_NAME_LABEL], "t1");
        assert_eq!(labels["app"], "a", "other labels stay");
        assert_eq!(forged["metadata"]["ownerReferences"].as_array().unwrap().len(), 1);
        assert_eq!(forged["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        stamp(&mut forged, &owner, false);
        assert!(
            forged["metadata"].get("ownerReferences").is_none(),
            "no reference where none can hold"
        );
    }

    #[test]
    fn an_owner_needs_a_uid() {
        assert!(Owner::of(&json!({"apiVersion": "v1", "kind": "A", "metadata": {"name": "a"}})).is_none());
    }

    #[test]
    fn kind_labels_are_valid_label_values() {
        let long = json!({"apiVersion": format!("{}.example.com/v1", "g".repeat(80)), "kind": "Site",
            "metadata": {"name": "a", "uid": "u"}});
        let label = Owner::of(&long).unwrap().kind_label();
        assert!(
            label.len() <= 63 && label.ends_with(|c: char| c.is_ascii_alphanumeric()),
            "{label}"
        );
        let core = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "uid": "u"}});
        assert_eq!(Owner::of(&core).unwrap().kind_label(), "Pod");
    }

    #[test]
    fn legacy_managers_are_renamed_or_dropped() {
        let live = json!({"metadata": {"managedFields": [
            {"manager": "orkestra", "operation": "Apply", "fieldsV1": {"f:data": {}}},
            {"manager": "kubectl", "operation": "Update"},
        ]}});
        let migrated = migrated_managers(&live, "orkestra/sites.demo.io").unwrap();
        assert_eq!(migrated[0]["manager"], "orkestra/sites.demo.io");
        assert_eq!(migrated[0]["fieldsV1"], json!({"f:data": {}}));
        assert_eq!(migrated[1]["manager"], "kubectl");
        let both = json!({"metadata": {"managedFields": [
            {"manager": "orkestra", "operation": "Apply"},
            {"manager": "orkestra/sites.demo.io", "operation": "Apply"},
        ]}});
        assert_eq!(
            migrated_managers(&both, "orkestra/sites.demo.io").unwrap(),
            vec![json!({"manager": "orkestra/sites.demo.io", "operation": "Apply"})]
        );
        assert_eq!(
            migrated_managers(
                &json!({"metadata": {"managedFields": [both["metadata"]["managedFields"][1]]}}),
                "m"
            ),
            None
        );
    }

    #[test]
    fn field_managers_are_per_tenant_and_within_the_limit() {
        assert_eq!(
            field_manager("orkestra", "sites.demo.io", None),
            "orkestra/sites.demo.io"
        );
        assert_eq!(
            field_manager("orkestra-wasm", "sites.demo.io", Some("canary")),
            "orkestra-wasm/sites.demo.io/canary"
        );
        let long = "x".repeat(200);
        let a = field_manager("orkestra", &format!("{long}.a"), None);
        let b = field_manager("orkestra", &format!("{long}.b"), None);
        assert!(a.len() <= 128 && b.len() <= 128);
        assert_ne!(a, b, "cut names keep apart");
    }
}
