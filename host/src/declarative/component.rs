//! The Wasm side of the declarative reconciler: builds the request a hook or constructor
//! receives, calls it through its slot, and turns its response into what the host applies:
//! children (checked against the grants, stamped as ours), status fields, events and the
//! outcome.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::Declarative;
use super::apply;
use super::render::{MANAGED_LABEL, OWNER_LABEL, Replace, Tree};
use crate::labels::COMPONENT_CHILDREN;
use crate::mux::{Action, ReconcileError, Request};
use crate::resolver::Resolver;
use crate::wasm::grants::{Access, Verb};
use crate::wasm::{self, Caller, EventType, Gvk, Hook, Outcome, Slot};

/// What a call left for the rest of the reconcile.
#[derive(Default)]
pub struct Applied {
    /// Children applied, by lowercase kind (first of each kind), as `.children` shows them.
    pub children: Map<String, Value>,
    pub wrote: bool,
    /// Merged into `.status` after the Katalog's own fields.
    pub status: Option<Map<String, Value>>,
    pub action: Option<Action>,
}

impl Declarative {
    /// Calls `hook` of the slot's serving component for `request` (`object` is the CR as the
    /// templates saw it) and applies its response.
    pub(super) async fn call_component(
        &self,
        slot: &Arc<Slot>,
        hook: Hook,
        request: &Request,
        object: Option<&Value>,
        context: &Map<String, Value>,
    ) -> Result<Applied, ReconcileError> {
        let Some(active) = slot.active() else {
            let why = slot.last_error().unwrap_or_else(|| "it has not loaded yet".into());
            return Err(ReconcileError::new("ComponentUnavailable", why));
        };
        let spec = &active.spec;
        let wasm_request = self.wasm_request(request, object, context, spec.args.as_ref())?;
        let caller = Caller {
            component: slot.name.clone(),
            key: request.key.clone(),
            namespace: object
                .and_then(|o| o["metadata"]["namespace"].as_str())
                .map(String::from),
        };
        let response = slot
            .host()
            .call(&active.loaded, spec, hook, caller.clone(), &wasm_request)
            .await
            .map_err(|e| ReconcileError::new(e.reason(), format!("component {}: {e}", slot.name)))?;
        let Some(response) = response else {
            return Ok(Applied::default());
        };
        let Some(cr) = object else {
            // Nothing to own children or status: only the log of the call remains.
            if let Outcome::Error(failure) = response.outcome {
                tracing::warn!(component = %slot.name, key = %request.key, reason = %failure.reason, "{}", failure.message);
            }
            return Ok(Applied::default());
        };
        for event in &response.events {
            let reason = bounded_reason(&event.reason);
            match event.event_type {
                EventType::Normal => self.events.normal(cr, &reason, event.message.clone()).await,
                EventType::Warning => self.events.warning(cr, &reason, event.message.clone()).await,
            }
        }
        if let Outcome::Error(failure) = &response.outcome {
            // A failed call changes nothing; its events above explain it.
            return Err(ReconcileError::new(
                bounded_reason(&failure.reason),
                failure.message.clone(),
            ));
        }
        let mut applied = Applied {
            status: match &response.status {
                Some(text) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(status)) => Some(status),
                    _ => {
                        return Err(ReconcileError::new(
                            "ComponentBadResult",
                            format!("component {}: status is not a JSON object", slot.name),
                        ));
                    }
                },
                None => None,
            },
            ..Applied::default()
        };
        // Every child is checked before any is applied: a denied one fails the reconcile
        // with nothing written.
        let cr_name = cr["metadata"]["name"].as_str().unwrap_or_default();
        let mut children = Vec::with_capacity(response.resources.len());
        for (i, text) in response.resources.iter().enumerate() {
            let bad = |why: String| {
                ReconcileError::new(
                    "ComponentBadResult",
                    format!("component {}: resources[{i}]: {why}", slot.name),
                )
            };
            let mut child: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
            if !child["metadata"].is_object() || !matches!(child["metadata"]["labels"], Value::Null | Value::Object(_))
            {
                return Err(bad("needs a metadata object (with labels, if any, as an object)".into()));
            }
            let (api_version, kind, _) = wasm::identity(&child).map_err(bad)?;
            let scoped = !self.applier.is_cluster_scoped(&child).await?;
            if scoped && child["metadata"]["namespace"].as_str().is_none() {
                child["metadata"]["namespace"] = cr["metadata"]["namespace"].clone();
            }
            let access = Access {
                verb: Verb::Apply,
                api_version: &api_version,
                kind: &kind,
                namespace: child["metadata"]["namespace"].as_str().filter(|_| scoped),
            };
            spec.grants
                .check(access, caller.namespace.as_deref())
                .map_err(|why| ReconcileError::new("ComponentForbidden", format!("component {}: {why}", slot.name)))?;
            child["metadata"]["labels"][MANAGED_LABEL] = json!("true");
            child["metadata"]["labels"][OWNER_LABEL] = json!(cr_name);
            children.push((api_version, kind, child));
        }
        let mode = apply::Mode {
            create_only: false,
            force: self.crd.for_object(cr).0.force_conflict,
            owned: true,
            replace: Replace::Never,
        };
        let mut returned: Vec<[String; 4]> = Vec::with_capacity(children.len());
        for (api_version, kind, child) in children {
            let (live, written) = self.applier.apply(child, cr, mode).await?;
            applied.wrote |= written;
            returned.push([
                api_version,
                kind.clone(),
                live["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
                live["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            ]);
            applied.children.entry(kind.to_lowercase()).or_insert(live);
        }
        applied.wrote |= self.prune(request, cr, returned).await?;
        applied.action = match response.outcome {
            Outcome::RequeueAfter(ms) => Some(Action::RequeueAfter(std::time::Duration::from_millis(ms))),
            _ => None,
        };
        Ok(applied)
    }

    /// Deletes the children (that we own) a component returned last time and not this time,
    /// and remembers this time's. Returns whether it wrote.
    async fn prune(
        &self,
        request: &Request,
        cr: &Value,
        mut returned: Vec<[String; 4]>,
    ) -> Result<bool, ReconcileError> {
        returned.sort();
        returned.dedup();
        let previous: Vec<[String; 4]> = cr["metadata"]["annotations"][COMPONENT_CHILDREN]
            .as_str()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        if previous == returned {
            return Ok(false);
        }
        for [api_version, kind, namespace, name] in previous.iter().filter(|p| !returned.contains(p)) {
            let mut child = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
            if !namespace.is_empty() {
                child["metadata"]["namespace"] = json!(namespace);
            }
            if self.applier.delete_if_owned(&child, cr).await? {
                tracing::info!(%kind, %name, key = %request.key, "the component no longer returns this child: deleted");
            }
        }
        let list = serde_json::to_string(&returned).unwrap_or_default();
        self.patch_object(
            request,
            json!({"metadata": {"annotations": {COMPONENT_CHILDREN: list}}}),
        )
        .await?;
        Ok(true)
    }

    fn wasm_request(
        &self,
        request: &Request,
        object: Option<&Value>,
        context: &Map<String, Value>,
        args: Option<&Value>,
    ) -> Result<wasm::Request, ReconcileError> {
        let mut shared = context.clone();
        let mut args = args.cloned();
        if let Some(object) = object {
            let resolver = Resolver::new(object, &self.crd.notes);
            for key in ["health", "metrics"] {
                if let Some(value) = resolver.lookup(key) {
                    shared.insert(key.into(), value.clone());
                }
            }
            // Args are templates over the CR, like every other Katalog value.
            if let (Some(raw), Some(functions)) = (&args, &self.functions) {
                let rendered = Tree::compile(raw, functions).and_then(|tree| tree.render(&resolver));
                args = Some(rendered.map_err(|e| ReconcileError::new("RenderFailed", format!("component args: {e}")))?);
            }
        }
        if let Some(args) = args {
            shared.insert("args".into(), args);
        }
        Ok(wasm::Request {
            key: request.key.clone(),
            gvk: Gvk {
                group: self.crd.group.clone(),
                version: self.crd.version.clone(),
                kind: self.crd.kind.clone(),
            },
            target: request.target.clone(),
            object: object.map(|o| o.to_string()),
            event_id: request.event_id,
            sentinels: crate::sentinel::NAMES
                .iter()
                .enumerate()
                .filter(|(i, _)| request.sentinels.is_set(*i))
                .map(|(_, name)| name.to_string())
                .collect(),
            context: Value::Object(shared).to_string(),
        })
    }
}

/// A guest's reason as a Kubernetes reason: CamelCase letters and digits, at most 64.
fn bounded_reason(reason: &str) -> String {
    let cleaned: String = reason.chars().filter(char::is_ascii_alphanumeric).take(64).collect();
    if cleaned.is_empty() {
        "ComponentError".into()
    } else {
        cleaned
    }
}

/// The `Component` condition: which version serves, or why the declared one does not.
pub(super) fn component_condition(status: &mut Value, slot: &Slot, generation: &Value, now: jiff::Timestamp) {
    let short = |digest: &str| digest.chars().take(12).collect::<String>();
    let (state, reason, message) = match (slot.active(), slot.last_error()) {
        (Some(active), None) => (
            "True",
            "Serving",
            format!(
                "{} revision {} (sha256 {}) serves",
                slot.name,
                active.revision,
                short(&active.loaded.digest)
            ),
        ),
        (Some(active), Some(error)) => (
            "False",
            "UpdateFailed",
            format!(
                "revision {} (sha256 {}) keeps serving; the new version did not load: {error}",
                active.revision,
                short(&active.loaded.digest)
            ),
        ),
        (None, error) => ("False", "LoadFailed", error.unwrap_or_else(|| "not loaded yet".into())),
    };
    let message = super::record::bounded(message, super::MESSAGE_LIMIT);
    super::set_condition(status, ["Component", state, reason, &message], generation, now);
}
