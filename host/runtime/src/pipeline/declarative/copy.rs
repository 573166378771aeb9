//! `fromConfigMap` / `fromSecret`: a ConfigMap or Secret child whose data is copied from
//! another object of its kind (`fromNamespace`, default the CR's), its own `data` written on
//! top. Each reconcile copies what the source holds then, so a watch on the source
//! (`observe.watch` with `keyFrom`) keeps the copy in sync.
//!
//! The CR's writer must not pick a namespace to read from: a source outside the CR's own
//! namespace is read only where the Katalog names it literally or lists it in
//! `allowedNamespaces` (the rule of [`admit`], which also places the copies).

use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_kube::objects::Objects;
use serde_json::Value;

use super::Declarative;
use crate::outcome::failure::{Reason, ReconcileError};
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::value::display;
use orkestra_expr::tree::Tree;
use orkestra_katalog::compile::{CompiledBox, Entry, admit};

impl Declarative {
    /// Fills `rendered` (the entry's object) with its source's data, if it names a source.
    pub(super) async fn copy_source(
        &self,
        entry: &Entry,
        scoped: &Resolver<'_, '_>,
        cr: &Value,
        guard: &CompiledBox,
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
        let name = display(&source.render(scoped).map_err(|e| failed(e.message))?).into_owned();
        if name.is_empty() {
            return Err(failed("renders empty".into()));
        }
        let own = cr["metadata"]["namespace"].as_str();
        let namespace = match entry.fields.get("fromNamespace") {
            None => own.unwrap_or_default().to_string(),
            Some(tree) => {
                let namespace = display(&tree.render(scoped).map_err(|e| failed(e.message))?).into_owned();
                if namespace.is_empty() {
                    own.unwrap_or_default().to_string()
                } else {
                    admit(&namespace, matches!(tree, Tree::Literal(_)), own, guard)
                        .map_err(|why| failed(format!("fromNamespace {why}")))?;
                    namespace
                }
            }
        };
        if namespace.is_empty() {
            return Err(failed(
                "a cluster-scoped custom resource has no namespace of its own: fromNamespace must name one".into(),
            ));
        }
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", entry.kind.kind));
        let api = Objects::<DynamicObject>::namespaced_with(self.client.clone(), &namespace, &resource)
            .map_err(|e| failed(e.to_string()))?;
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
