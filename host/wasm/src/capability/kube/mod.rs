//! `orkestra:operator/kube`: a guest's reads and writes of the cluster. Every call is checked
//! against the component's grants and its per-call budget (calls and bytes) first; a name or
//! object past what Kubernetes takes is refused before it costs a request; a write to an
//! object another custom resource controls is refused unless a grant says so.

use crate::error::Error;
use std::sync::Arc;

use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::Scope;
use serde_json::Value;

use super::super::bindings::kube::{self as wit_kube, KubeError, ObjectRef};
use super::super::caller::{Caller, Cluster};
use exchange::{KubeCall, KubeTap, Named, OnTape, value_of};
use orkestra_katalog::component::Limits;
use orkestra_katalog::component::grants::{Access, Grants, Verb};
use orkestra_kube::objects::Objects;
use wasmtime::component::HasData;

pub mod exchange;

/// Longest name, kind, apiVersion or namespace a guest may pass (Kubernetes names are at most
/// 253 bytes); longer ones are refused before anything else happens.
const NAME_LIMIT: usize = 253;
/// Largest object a guest may send to apply or patch (the API server's request limit).
const OBJECT_LIMIT: usize = 3 << 20;
/// Objects asked for in the first page of a list; later pages are sized to what is left of
/// the byte budget, so a list of huge objects never lands in host memory all at once.
const FIRST_PAGE: u32 = 10;
const MAX_PAGE: u32 = 200;

/// The kube capability's part of a call's store: the cluster it reaches (as the caller's
/// identity), the grants it is held to, what is left of the call's budgets, and the first
/// denial (kept so a guest that swallows it still fails its reconcile).
pub struct KubeState {
    pub cluster: Option<Cluster>,
    pub grants: Arc<Grants>,
    pub calls_left: u32,
    /// Bytes of objects it may still hand over.
    pub bytes_left: usize,
    /// The budget the limits gave, for messages.
    pub bytes: usize,
    pub denied: Option<String>,
}

impl KubeState {
    /// Full budgets for a call of `grants`, reaching `cluster`.
    pub fn new(cluster: Option<Cluster>, grants: Arc<Grants>, limits: &Limits) -> Self {
        Self {
            cluster,
            grants,
            calls_left: limits.kube_calls,
            bytes_left: limits.kube_bytes,
            bytes: limits.kube_bytes,
            denied: None,
        }
    }
}

/// What the kube functions see of a call's store: their own state, who is calling, and the
/// tape a recorded or replayed call goes through.
pub struct KubeView<'a> {
    pub state: &'a mut KubeState,
    pub caller: &'a Caller,
    pub tape: Option<&'a dyn KubeTap>,
}

/// The kube capability, as the linker knows it.
pub struct Kube;

impl HasData for Kube {
    type Data<'a> = KubeView<'a>;
}

/// The namespace an access is checked in, and the API to make it with.
struct Target {
    api: Objects<DynamicObject>,
    namespace: Option<String>,
    api_version: String,
    /// Whether a grant lets it write objects other custom resources control.
    others: bool,
}

impl KubeView<'_> {
    /// Budget, grant and kind resolution for one kube call.
    async fn admit(
        &mut self,
        verb: Verb,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Target, KubeError> {
        for (field, value) in [
            ("apiVersion", api_version),
            ("kind", kind),
            ("namespace", namespace.unwrap_or_default()),
        ] {
            if value.len() > NAME_LIMIT {
                return Err(KubeError::Rejected(format!(
                    "{field} is {} bytes; Kubernetes names are at most {NAME_LIMIT}",
                    value.len()
                )));
            }
        }
        let Some(cluster) = self.state.cluster.clone() else {
            return Err(KubeError::Unavailable("this host has no cluster connection".into()));
        };
        self.spend_call()?;
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
        if let Err(denied) = self.state.grants.check(access, self.caller.namespace.as_deref()) {
            return Err(self.deny(denied.to_string()));
        }
        let api = Objects::within(cluster.client.clone(), namespace.as_deref(), &resource)
            .map_err(|e| KubeError::Rejected(e.to_string()))?;
        Ok(Target {
            api,
            others: self.state.grants.others(access, self.caller.namespace.as_deref()),
            namespace,
            api_version: resource.api_version.clone(),
        })
    }

    /// [`KubeView::admit`] for the object a guest names, its name checked first.
    async fn admit_ref(&mut self, verb: Verb, object: &ObjectRef) -> Result<Target, KubeError> {
        check_name(&object.name)?;
        self.admit(verb, &object.api_version, &object.kind, object.namespace.as_deref())
            .await
    }

    /// Before a write to `name`: refused when another custom resource controls the object
    /// (by its controller reference or the host's owner label), unless a grant allows it.
    /// Reading it costs a kube call.
    async fn check_not_others(&mut self, target: &Target, kind: &str, name: &str) -> Result<(), KubeError> {
        if target.others {
            return Ok(());
        }
        self.spend_call()?;
        let Some(live) = target.api.get_opt(name).await.map_err(kube_error)? else {
            return Ok(());
        };
        let own = self.caller.owner_uid.as_deref();
        let controller = live
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true))
            .map(|r| (r.uid.as_str(), format!("{} {}", r.kind, r.name)));
        let labelled = live
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(orkestra_expr::labels::OWNER_UID_LABEL))
            .map(|uid| (uid.as_str(), "the host's owner label".to_string()));
        match controller.or(labelled) {
            Some((uid, whose)) if Some(uid) != own => {
                let message = format!(
                    "{kind} {name} is controlled by another custom resource ({whose}); writing it needs controlledByOthers: true on the capability"
                );
                Err(self.deny(message))
            }
            _ => Ok(()),
        }
    }

    /// Before an apply: the object itself may not claim to be another custom resource's (by
    /// the host's owner label or a controller reference), or the host would take it for that
    /// one's child the moment it is written; refused before it is, unless a grant allows it.
    fn check_claims(&mut self, target: &Target, kind: &str, name: &str, object: &Value) -> Result<(), KubeError> {
        if target.others {
            return Ok(());
        }
        let own = self.caller.owner_uid.as_deref();
        let metadata = &object["metadata"];
        let labelled = metadata["labels"][orkestra_expr::labels::OWNER_UID_LABEL]
            .as_str()
            .map(|uid| (uid, "the host's owner label".to_string()));
        let controller = metadata["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["controller"] == Value::Bool(true))
            .and_then(|r| {
                Some((
                    r["uid"].as_str()?,
                    format!("a controller reference to {}", r["name"].as_str()?),
                ))
            });
        match labelled
            .into_iter()
            .chain(controller)
            .find(|(uid, _)| Some(*uid) != own)
        {
            Some((_, claim)) => {
                let message = format!(
                    "{kind} {name} claims another custom resource ({claim}); a component may claim only its own, unless the capability says controlledByOthers: true"
                );
                Err(self.deny(message))
            }
            None => Ok(()),
        }
    }

    /// A denial: said in the log, kept as the call's first (so a guest that swallows it
    /// still fails its reconcile), and answered as Forbidden.
    fn deny(&mut self, message: String) -> KubeError {
        tracing::warn!(component = %self.caller.component, key = %self.caller.key, "denied: {message}");
        self.state.denied.get_or_insert_with(|| message.clone());
        KubeError::Forbidden(message)
    }

    /// One write made for the custom resource.
    fn wrote(&self) {
        self.caller.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The one way a kube function is answered: from the tape when this call is a replay; else
/// by `live` (a future, so never started when the tape answers), taken down with its answer
/// when this call is recorded. `call` is built only when there is a tape.
async fn through_tape<T: OnTape>(
    tape: Option<&dyn KubeTap>,
    call: impl FnOnce() -> KubeCall,
    live: impl Future<Output = Result<T, KubeError>>,
) -> Result<T, KubeError> {
    let Some(tape) = tape else {
        return live.await;
    };
    let call = call();
    if let Some(answer) = tape.played(&call) {
        return T::played(&answer);
    }
    let answer = live.await;
    tape.took(call, T::taken(&answer));
    answer
}

impl KubeView<'_> {
    /// A non-apply write under the component's own field manager.
    fn patch_params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.caller.manager.to_string()),
            ..PatchParams::default()
        }
    }

    /// One request to the API server, if the budget has one left.
    fn spend_call(&mut self) -> Result<(), KubeError> {
        if self.state.calls_left == 0 {
            return Err(KubeError::Unavailable(
                "the per-call budget of kube calls is spent (limits.kubeCalls)".into(),
            ));
        }
        self.state.calls_left -= 1;
        Ok(())
    }

    /// An object on its way to the guest, if the byte budget still holds it.
    fn hand_over(&mut self, object: &impl serde::Serialize) -> Result<String, KubeError> {
        let text = to_json(object)?;
        if text.len() > self.state.bytes_left {
            self.state.bytes_left = 0;
            return Err(KubeError::Unavailable(format!(
                "the per-call budget of {} kube bytes is spent (limits.kubeBytes)",
                self.state.bytes
            )));
        }
        self.state.bytes_left -= text.len();
        Ok(text)
    }
}

/// A name a guest passes, refused when no Kubernetes object could have it (before it is
/// spent on a kube call; [`Objects`] checks it again where it enters the URL).
fn check_name(name: &str) -> Result<(), KubeError> {
    orkestra_expr::names::check_name(name).map_err(|e| KubeError::Rejected(e.to_string()))
}

/// An object a guest sends, refused past the API server's request limit before it is parsed.
fn check_object(what: &str, text: &str) -> Result<(), KubeError> {
    if text.len() > OBJECT_LIMIT {
        return Err(KubeError::Rejected(format!(
            "{what}: {} bytes is more than the API server takes ({OBJECT_LIMIT})",
            text.len()
        )));
    }
    Ok(())
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

impl wit_kube::Host for KubeView<'_> {
    // Only host-known fields: what the guest passes is checked (and bounded) inside.
    #[tracing::instrument(level = "debug", name = "kube.get", skip_all, fields(component = %self.caller.component, key = %self.caller.key))]
    async fn get(&mut self, object: ObjectRef) -> wasmtime::Result<Result<String, KubeError>> {
        let tape = self.tape;
        let call = || KubeCall::Get {
            object: (&object).into(),
        };
        let live = async {
            let target = self.admit_ref(Verb::Get, &object).await?;
            let found = target.api.get(&object.name).await.map_err(kube_error)?;
            self.hand_over(&found)
        };
        Ok(through_tape(tape, call, live).await)
    }

    #[tracing::instrument(level = "debug", name = "kube.list-objects", skip_all, fields(component = %self.caller.component, key = %self.caller.key))]
    async fn list_objects(
        &mut self,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> wasmtime::Result<Result<Vec<String>, KubeError>> {
        let tape = self.tape;
        let call = || KubeCall::List {
            api_version: api_version.clone(),
            kind: kind.clone(),
            namespace: namespace.clone(),
            label_selector: label_selector.clone(),
        };
        let live = async {
            if label_selector.as_ref().is_some_and(|l| l.len() > OBJECT_LIMIT / 1024) {
                return Err(KubeError::Rejected("the label selector is too long".into()));
            }
            let target = self
                .admit(Verb::List, &api_version, &kind, namespace.as_deref())
                .await?;
            // Page by page, each page a kube call and every object counted against the byte
            // budget as it arrives: a list stops where the budget does.
            let mut items = Vec::new();
            let mut page = FIRST_PAGE;
            let mut next: Option<String> = None;
            loop {
                let mut params = ListParams::default().limit(page);
                if let Some(selector) = &label_selector {
                    params = params.labels(selector);
                }
                if let Some(token) = next.take() {
                    self.spend_call()?;
                    params = params.continue_token(&token);
                }
                let list = target.api.list(&params).await.map_err(kube_error)?;
                for item in &list.items {
                    items.push(self.hand_over(item)?);
                }
                match list.metadata.continue_.filter(|t| !t.is_empty()) {
                    Some(token) => next = Some(token),
                    None => return Ok(items),
                }
                let average = items.iter().map(String::len).sum::<usize>() / items.len().max(1);
                page = (self.state.bytes_left / average.max(1)).clamp(1, MAX_PAGE as usize) as u32;
            }
        };
        Ok(through_tape(tape, call, live).await)
    }

    #[tracing::instrument(level = "debug", name = "kube.apply", skip_all, fields(component = %self.caller.component, key = %self.caller.key))]
    async fn apply(&mut self, object: String) -> wasmtime::Result<Result<String, KubeError>> {
        let tape = self.tape;
        let call = || KubeCall::Apply {
            object: value_of(&object),
        };
        let live = async {
            check_object("apply", &object)?;
            let mut value: Value = serde_json::from_str(&object)
                .map_err(|e| KubeError::Rejected(format!("apply: the object is not JSON: {e}")))?;
            let (api_version, kind, name) = identity(&value).map_err(|e| KubeError::Rejected(e.to_string()))?;
            check_name(&name)?;
            if value["metadata"].get("finalizers").is_some_and(|f| !f.is_null()) {
                return Err(KubeError::Rejected(
                    "apply: metadata.finalizers are the host's to set, not a component's (nothing would ever remove them)"
                        .into(),
                ));
            }
            let namespace = value["metadata"]["namespace"].as_str().map(String::from);
            let target = self
                .admit(Verb::Apply, &api_version, &kind, namespace.as_deref())
                .await?;
            self.check_claims(&target, &kind, &name, &value)?;
            self.check_not_others(&target, &kind, &name).await?;
            value["apiVersion"] = Value::String(target.api_version.clone());
            if let Some(ns) = &target.namespace {
                value["metadata"]["namespace"] = Value::String(ns.clone());
            }
            let params = PatchParams::apply(&self.caller.manager).force();
            self.wrote();
            let stored = target
                .api
                .patch(&name, &params, &Patch::Apply(&value))
                .await
                .map_err(kube_error)?;
            self.hand_over(&stored)
        };
        Ok(through_tape(tape, call, live).await)
    }

    #[tracing::instrument(level = "debug", name = "kube.delete", skip_all, fields(component = %self.caller.component, key = %self.caller.key))]
    async fn delete(&mut self, object: ObjectRef) -> wasmtime::Result<Result<(), KubeError>> {
        let tape = self.tape;
        let call = || KubeCall::Delete {
            object: (&object).into(),
        };
        let live = async {
            let target = self.admit_ref(Verb::Delete, &object).await?;
            self.check_not_others(&target, &object.kind, &object.name).await?;
            self.wrote();
            target
                .api
                .delete(&object.name, &DeleteParams::background())
                .await
                .map_err(kube_error)?;
            Ok(())
        };
        Ok(through_tape(tape, call, live).await)
    }

    #[tracing::instrument(level = "debug", name = "kube.patch-status", skip_all, fields(component = %self.caller.component, key = %self.caller.key))]
    async fn patch_status(&mut self, object: ObjectRef, status: String) -> wasmtime::Result<Result<String, KubeError>> {
        let tape = self.tape;
        let call = || KubeCall::PatchStatus {
            object: Named::from(&object),
            status: value_of(&status),
        };
        let live = async {
            check_object("patch-status", &status)?;
            let status: Value = serde_json::from_str(&status)
                .map_err(|e| KubeError::Rejected(format!("patch-status: the status is not JSON: {e}")))?;
            let target = self.admit_ref(Verb::PatchStatus, &object).await?;
            self.check_not_others(&target, &object.kind, &object.name).await?;
            self.wrote();
            let patch = serde_json::json!({ "status": status });
            let stored = target
                .api
                .patch_status(&object.name, &self.patch_params(), &Patch::Merge(&patch))
                .await
                .map_err(kube_error)?;
            self.hand_over(&stored)
        };
        Ok(through_tape(tape, call, live).await)
    }
}

/// apiVersion, kind and name of an object a guest hands over.
pub fn identity(object: &Value) -> Result<(String, String, String), Error> {
    let field = |value: &Value, name: &str| {
        value
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from)
            .ok_or_else(|| Error::Identity(format!("the object has no {name}")))
    };
    Ok((
        field(&object["apiVersion"], "apiVersion")?,
        field(&object["kind"], "kind")?,
        field(&object["metadata"]["name"], "metadata.name")?,
    ))
}
