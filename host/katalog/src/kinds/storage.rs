//! PersistentVolumes and PersistentVolumeClaims from `storage`.

use crate::error::Error;
use serde_json::{Value, json};

use super::shorthand::*;
use super::{KindSpec, Shorthand};

pub(super) const PERSISTENT_VOLUMES: KindSpec = KindSpec {
    key: "persistentVolumes",
    resource: "persistentvolumes",
    suffix: Some("pv"),
    api_version: "v1",
    kind: "PersistentVolume",
    namespaced: false,
    pod: false,
    fields: &[
        "storage",
        "capacity",
        "accessModes",
        "storageClassName",
        "reclaimPolicy",
        "volumeMode",
        "hostPath",
        "nfs",
        "csi",
    ],
    render: render_persistent_volumes,
};

fn render_persistent_volumes(s: &Shorthand<'_>) -> Result<Value, Error> {
    let capacity = match (s.get("capacity"), s.get("storage")) {
        (Some(capacity), _) => capacity,
        (None, Some(storage)) => json!({"storage": storage}),
        (None, None) => return Err(Error::Render("storage (or capacity) is required".into())),
    };
    let mut spec = json!({
        "capacity": capacity,
        "accessModes": s.get("accessModes").unwrap_or_else(|| json!(["ReadWriteOnce"])),
    });
    copy(s.fields, &mut spec, &["storageClassName", "volumeMode", "nfs", "csi"]);
    if let Some(policy) = s.get("reclaimPolicy") {
        spec["persistentVolumeReclaimPolicy"] = policy;
    }
    match s.get("hostPath") {
        Some(Value::String(path)) => spec["hostPath"] = json!({"path": path}),
        Some(other) => spec["hostPath"] = other,
        None => {}
    }
    Ok(json!({"spec": spec}))
}

pub(super) const PERSISTENT_VOLUME_CLAIMS: KindSpec = KindSpec {
    key: "persistentVolumeClaims",
    resource: "persistentvolumeclaims",
    suffix: Some("pvc"),
    api_version: "v1",
    kind: "PersistentVolumeClaim",
    namespaced: true,
    pod: false,
    fields: &["storage", "accessModes", "storageClassName", "volumeMode", "volumeName"],
    render: render_persistent_volume_claims,
};

fn render_persistent_volume_claims(s: &Shorthand<'_>) -> Result<Value, Error> {
    let mut spec = json!({
        "accessModes": s.get("accessModes").unwrap_or_else(|| json!(["ReadWriteOnce"])),
        "resources": {"requests": {"storage": s.get("storage").ok_or_else(|| Error::Render("storage is required".into()))?}},
    });
    copy(s.fields, &mut spec, &["storageClassName", "volumeMode", "volumeName"]);
    Ok(json!({"spec": spec}))
}
