//! `fromConfigMap` / `fromSecret`: a ConfigMap or Secret child whose data is copied from
//! another object of its kind (`fromNamespace`, default the CR's), its own `data` written on
//! top. Each reconcile copies what the source holds then, so a watch on the source
//! (`observe.watch` with `keyFrom`) keeps the copy in sync.
//!
//! The CR's writer must not pick a namespace to read from: a source outside the CR's own
//! namespace is allowed only where the Katalog names that namespace literally.

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::Declarative;
use crate::failure::{Reason, ReconcileError};
use orkestra_katalog::compile::Entry;
use orkestra_katalog::resolver::Resolver;
use orkestra_katalog::template::value::display;
use orkestra_katalog::tree::Tree;

impl Declarative {
    /// Fills `rendered` (the entry's object) with its source's data, if it names a source.
    pub(super) async fn copy_source(
        &self,
        entry: &Entry,
        scoped: &Resolver<'_, '_>,
        cr: &Value,
        rendered: &mut Value,
    ) -> Result<(), ReconcileError> {
        let field = match entry.kind.key {
            "configMaps" => "fromConfigMap",
            "secrets" => "fromSecret",
            _ => return Ok(()),
        };
        let Some(source) = entry.fields.get(field) else {
            return Ok(());
        };
        let failed =
            |why: String| ReconcileError::new(Reason::CopySourceFailed, format!("{}.{field}: {why}", entry.at));
        let name = display(&source.render(scoped).map_err(&failed)?).into_owned();
        if name.is_empty() {
            return Err(failed("renders empty".into()));
        }
        let own = cr["metadata"]["namespace"].as_str().unwrap_or_default();
        let namespace = match entry.fields.get("fromNamespace") {
            None => own.to_string(),
            Some(tree) => {
                let namespace = display(&tree.render(scoped).map_err(&failed)?).into_owned();
                if namespace.is_empty() {
                    own.to_string()
                } else if namespace != own && !matches!(tree, Tree::Literal(_)) {
                    return Err(failed(format!(
                        "fromNamespace renders to \"{namespace}\", not the custom resource's own namespace; another namespace must be written literally in the Katalog"
                    )));
                } else {
                    namespace
                }
            }
        };
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", entry.kind.kind));
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &namespace, &resource);
        let found = api
            .get_opt(&name)
            .await
            .map_err(|e| failed(format!("reading {} {namespace}/{name}: {e}", entry.kind.kind)))?
            .ok_or_else(|| failed(format!("{} {namespace}/{name} does not exist", entry.kind.kind)))?;
        // The source's data under the entry's own: what the Katalog writes wins (a Secret's
        // own values go as stringData, which the API server lays over data).
        for key in ["data", "binaryData"] {
            let Some(Value::Object(copied)) = found.data.get(key) else {
                continue;
            };
            let mut merged = copied.clone();
            if let Some(Value::Object(written)) = rendered.get(key) {
                merged.extend(written.clone());
            }
            rendered[key] = Value::Object(merged);
        }
        Ok(())
    }
}
