//! What one call's store holds, and the host side of the `kube` and `log` imports: every
//! kube call is checked against the component's grants and its per-call budget first.

use std::sync::Arc;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::Scope;
use serde_json::Value;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::kube::{KubeError, ObjectRef};
use super::bindings::{kube as wit_kube, log as wit_log, types as wit_types};
use super::grants::{Access, Grants, Verb};
use crate::discovery::KindCache;

/// Field manager of the objects a component applies through `kube.apply`.
pub const FIELD_MANAGER: &str = "orkestra-wasm";

/// Longest log line kept; longer ones are cut.
const LOG_LINE_LIMIT: usize = 4096;

/// The cluster, as a component may reach it.
#[derive(Clone)]
pub struct Cluster {
    pub client: kube::Client,
    pub kinds: KindCache,
}

/// Who is calling, for log records and grant checks.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The component's slot (`crd` or `crd/target`).
    pub component: Arc<str>,
    /// The custom resource's key.
    pub key: String,
    /// The custom resource's namespace (`self` in grants).
    pub namespace: Option<String>,
}

/// Resource limiter: one cap on linear memory, remembered when hit so the failure can be
/// told apart from other traps.
pub struct MemoryCap {
    pub max: usize,
    pub hit: bool,
}

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.hit = true;
            return Err(wasmtime::format_err!(
                "memory limit of {} bytes reached (asked for {desired})",
                self.max
            ));
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        // Table elements live in host memory: bound them as the pool does.
        Ok(desired <= 100_000)
    }
}

/// The data of one call's store.
pub struct CallState {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub memory: MemoryCap,
    pub cluster: Option<Cluster>,
    pub grants: Arc<Grants>,
    pub caller: Caller,
    pub kube_calls_left: u32,
    /// Bytes the guest may still send back through logs (results are checked separately).
    pub log_bytes_left: usize,
    /// The first denial, kept so a guest that swallows it still fails its reconcile.
    pub denied: Option<String>,
    /// The last error-level line the guest logged (a panic message), to explain a trap.
    pub last_error: Option<String>,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wit_types::Host for CallState {}

impl wit_log::Host for CallState {
    fn log(&mut self, level: wit_log::Level, message: String) -> wasmtime::Result<()> {
        if self.log_bytes_left == 0 {
            return Ok(());
        }
        let mut message = message;
        let keep = message.len().min(LOG_LINE_LIMIT).min(self.log_bytes_left);
        if keep < message.len() {
            let mut cut = keep;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        self.log_bytes_left = self.log_bytes_left.saturating_sub(keep.max(1));
        if matches!(level, wit_log::Level::Error) {
            self.last_error = Some(message.clone());
        }
        let (component, key) = (&*self.caller.component, &self.caller.key);
        match level {
            wit_log::Level::Debug => tracing::debug!(target: "guest", component, key, "{message}"),
            wit_log::Level::Info => tracing::info!(target: "guest", component, key, "{message}"),
            wit_log::Level::Warn => tracing::warn!(target: "guest", component, key, "{message}"),
            wit_log::Level::Error => tracing::error!(target: "guest", component, key, "{message}"),
        }
        Ok(())
    }
}

/// The namespace an access is checked in, and the API to make it with.
struct Target {
    api: Api<DynamicObject>,
    namespace: Option<String>,
    api_version: String,
}

impl CallState {
    /// Budget, grant and kind resolution for one kube call.
    async fn admit(
        &mut self,
        verb: Verb,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Target, KubeError> {
        let Some(cluster) = self.cluster.clone() else {
            return Err(KubeError::Unavailable("this host has no cluster connection".into()));
        };
        if self.kube_calls_left == 0 {
            return Err(KubeError::Unavailable(
                "the per-call budget of kube calls is spent".into(),
            ));
        }
        self.kube_calls_left -= 1;
        let (resource, scope) = cluster
            .kinds
            .resolve(&cluster.client, api_version, kind)
            .await
            .map_err(|e| KubeError::Unavailable(format!("{api_version} {kind} is not served: {e}")))?;
        let namespace = match scope {
            Scope::Cluster => None,
            // A namespaced kind without a namespace means the custom resource's own, except
            // for a list, where it means every namespace.
            Scope::Namespaced => namespace
                .map(String::from)
                .or_else(|| (verb != Verb::List).then(|| self.caller.namespace.clone()).flatten()),
        };
        let access = Access {
            verb,
            api_version,
            kind,
            namespace: namespace.as_deref(),
        };
        if let Err(message) = self.grants.check(access, self.caller.namespace.as_deref()) {
            tracing::warn!(component = %self.caller.component, key = %self.caller.key, "denied: {message}");
            self.denied.get_or_insert_with(|| message.clone());
            return Err(KubeError::Forbidden(message));
        }
        let api = match &namespace {
            Some(ns) => Api::namespaced_with(cluster.client.clone(), ns, &resource),
            None => Api::all_with(cluster.client.clone(), &resource),
        };
        Ok(Target {
            api,
            namespace,
            api_version: resource.api_version.clone(),
        })
    }
}

fn kube_error(error: kube::Error) -> KubeError {
    match error {
        kube::Error::Api(status) if status.code == 404 => KubeError::NotFound,
        kube::Error::Api(status) => KubeError::Rejected(status.message),
        other => KubeError::Unavailable(other.to_string()),
    }
}

fn to_json(object: &impl serde::Serialize) -> Result<String, KubeError> {
    serde_json::to_string(object).map_err(|e| KubeError::Unavailable(format!("cannot encode the object: {e}")))
}

impl wit_kube::Host for CallState {
    async fn get(&mut self, object: ObjectRef) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(async {
            let target = self
                .admit(
                    Verb::Get,
                    &object.api_version,
                    &object.kind,
                    object.namespace.as_deref(),
                )
                .await?;
            to_json(&target.api.get(&object.name).await.map_err(kube_error)?)
        }
        .await)
    }

    async fn list_objects(
        &mut self,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> wasmtime::Result<Result<Vec<String>, KubeError>> {
        Ok(async {
            let target = self
                .admit(Verb::List, &api_version, &kind, namespace.as_deref())
                .await?;
            let mut params = ListParams::default();
            if let Some(selector) = &label_selector {
                params = params.labels(selector);
            }
            let list = target.api.list(&params).await.map_err(kube_error)?;
            list.items.iter().map(to_json).collect()
        }
        .await)
    }

    async fn apply(&mut self, object: String) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(async {
            let mut value: Value = serde_json::from_str(&object)
                .map_err(|e| KubeError::Rejected(format!("apply: the object is not JSON: {e}")))?;
            let (api_version, kind, name) = identity(&value).map_err(KubeError::Rejected)?;
            let namespace = value["metadata"]["namespace"].as_str().map(String::from);
            let target = self
                .admit(Verb::Apply, &api_version, &kind, namespace.as_deref())
                .await?;
            value["apiVersion"] = Value::String(target.api_version.clone());
            if let Some(ns) = &target.namespace {
                value["metadata"]["namespace"] = Value::String(ns.clone());
            }
            let params = PatchParams::apply(FIELD_MANAGER).force();
            let stored = target
                .api
                .patch(&name, &params, &Patch::Apply(&value))
                .await
                .map_err(kube_error)?;
            to_json(&stored)
        }
        .await)
    }

    async fn delete(&mut self, object: ObjectRef) -> wasmtime::Result<Result<(), KubeError>> {
        Ok(async {
            let target = self
                .admit(
                    Verb::Delete,
                    &object.api_version,
                    &object.kind,
                    object.namespace.as_deref(),
                )
                .await?;
            target
                .api
                .delete(&object.name, &DeleteParams::background())
                .await
                .map_err(kube_error)?;
            Ok(())
        }
        .await)
    }

    async fn patch_status(&mut self, object: ObjectRef, status: String) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(async {
            let status: Value = serde_json::from_str(&status)
                .map_err(|e| KubeError::Rejected(format!("patch-status: the status is not JSON: {e}")))?;
            let target = self
                .admit(
                    Verb::PatchStatus,
                    &object.api_version,
                    &object.kind,
                    object.namespace.as_deref(),
                )
                .await?;
            let patch = serde_json::json!({ "status": status });
            let stored = target
                .api
                .patch_status(&object.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(kube_error)?;
            to_json(&stored)
        }
        .await)
    }
}

/// apiVersion, kind and name of an object a guest hands over.
pub fn identity(object: &Value) -> Result<(String, String, String), String> {
    let field = |value: &Value, name: &str| {
        value
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from)
            .ok_or_else(|| format!("the object has no {name}"))
    };
    Ok((
        field(&object["apiVersion"], "apiVersion")?,
        field(&object["kind"], "kind")?,
        field(&object["metadata"]["name"], "metadata.name")?,
    ))
}
