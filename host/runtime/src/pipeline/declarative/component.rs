//! The Wasm side of the declarative reconciler: builds the request a hook or constructor
//! receives, calls it through its slot, and turns its response into what the host applies:
//! children (checked against the grants, stamped as ours), status fields, events and the
//! outcome.

use std::sync::Arc;

use parking_lot::Mutex;
use tracing::Instrument as _;

use serde_json::{Map, Value, json};

use kube::api::DeleteParams;

use super::Declarative;
use super::applied::Applied;
use super::apply::{self, Deletion};
use crate::outcome::failure::{Reason, ReconcileError, guest_reason};
use crate::pipeline::mux::{Action, Request};
use orkestra_expr::labels::COMPONENT_CHILDREN;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::Functions;
use orkestra_expr::text::bounded;
use orkestra_expr::tree::Tree;
use orkestra_katalog::compile::Replace;
use orkestra_katalog::component::grants::{Access, Verb};
use orkestra_wasm::rollout::{Step, StepKind, short};
use orkestra_wasm::{Active, CallError, Caller, EventType, Gvk, Hook, Outcome, Response, Role, Slot, Spec};

/// Longest guest-supplied message kept for a log line or an error (the Ready condition and
/// Events cut further).
const LOG_MESSAGE_LIMIT: usize = 1024;
/// Longest name, kind or apiVersion in the remembered list of children.
const NAME_LIMIT: usize = 253;
/// Largest list of children remembered on a CR (its annotations hold 256 KiB in all).
const REMEMBERED_LIMIT: usize = 128 << 10;

impl Declarative {
    /// Calls `hook` of the version of the slot's component that serves this CR (during a
    /// rollout, the new one for its share of the CRs) for `request` (`object` is the CR as
    /// the templates saw it) and applies its response; how that ended counts towards the
    /// rollout's verdict.
    pub(super) async fn call_component(
        &self,
        slot: &Arc<Slot>,
        hook: Hook,
        request: &Request,
        object: Option<&Value>,
        context: &Map<String, Value>,
    ) -> Result<Applied, ReconcileError> {
        let Some((active, _)) = slot.serving(&request.key) else {
            let why = slot.last_error().unwrap_or_else(|| "it has not loaded yet".into());
            return Err(ReconcileError::new(Reason::ComponentUnavailable, why));
        };
        let span = tracing::debug_span!("component", slot = %slot.name, hook = ?hook, revision = active.revision,
            digest = %short(&active.loaded.digest));
        let result = self
            .run_component(slot, &active, hook, request, object, context)
            .instrument(span)
            .await;
        // A rollout judges the version on what the component itself did: a reconcile cut
        // short, or failed by the cluster or a template over a tenant's input, says nothing
        // of it.
        let judged = match &result {
            Ok(_) => Some(true),
            Err(error) if error.reason.is_component_fault() => Some(false),
            Err(_) => None,
        };
        if let Some(ok) = judged {
            let tenant = orkestra_kube::tenant::of(&request.key, None);
            slot.feedback(&active, &tenant, ok);
        }
        result
    }

    /// [`Declarative::call_component`] on the version `active`.
    async fn run_component(
        &self,
        slot: &Arc<Slot>,
        active: &Active,
        hook: Hook,
        request: &Request,
        object: Option<&Value>,
        context: &Map<String, Value>,
    ) -> Result<Applied, ReconcileError> {
        let spec = &active.spec;
        let wasm_request = self.wasm_request(request, object, context, spec)?;
        // A CR already gone (its not-found call) is still of its key's namespace.
        let namespace = object
            .and_then(|o| o["metadata"]["namespace"].as_str())
            .or_else(|| request.key.split_once('/').map(|(ns, _)| ns))
            .map(String::from);
        let acting_as = self.identity(slot, spec, namespace.as_deref())?;
        let caller = Caller {
            component: slot.name.clone(),
            key: request.key.clone(),
            namespace,
            manager: self.managers.component.as_str().into(),
            client: acting_as.as_ref().map(|(_, client)| client.clone()),
            owner_uid: object.and_then(|o| o["metadata"]["uid"].as_str()).map(String::from),
            writes: Default::default(),
        };
        let response = slot.call(active, hook, caller.clone(), &wasm_request).await;
        // Its own kube writes count against the CR's write budget like the host's.
        if let Some(meter) = crate::outcome::budget::Meter::current() {
            meter.add(caller.writes.load(std::sync::atomic::Ordering::Relaxed));
        }
        let response =
            response.map_err(|e| ReconcileError::new(call_reason(&e), format!("component {}: {e}", slot.name)))?;
        let Some(response) = response else {
            return Ok(Applied::default());
        };
        let Some(cr) = object else {
            // Nothing to own children or status: only the log of the call remains.
            if let Outcome::Error(failure) = response.outcome {
                tracing::warn!(component = %slot.name, key = %request.key, reason = %guest_reason(&failure.reason),
                    "{}", bounded(failure.message, LOG_MESSAGE_LIMIT));
            }
            return Ok(Applied::default());
        };
        // What the host does for a response is bounded too: by the caps the call was checked
        // against, by this deadline, and by the CR's deletion or the runtime's shutdown.
        let applier = match &acting_as {
            Some((_, client)) => &self.applier.acting_as(client.clone()),
            None => &self.applier,
        };
        let applying = self.apply_response(applier, slot, spec, &caller, request, cr, response);
        let applying = async {
            // The API server's refusal of the component's own account is the component's.
            applying.await.map_err(|error| match (&acting_as, error.status_code()) {
                (Some((user, _)), Some(403)) => ReconcileError::new(
                    Reason::ComponentForbidden,
                    format!("component {} acting as {user}: {}", slot.name, error.message),
                ),
                _ => error,
            })
        };
        match tokio::time::timeout(spec.limits.apply_timeout, applying).await {
            Ok(applied) => applied,
            Err(_) => Err(ReconcileError::new(
                Reason::ComponentApplyTimeout,
                format!(
                    "component {}: applying what it returned took longer than its limits.applyTimeout of {:?}",
                    slot.name, spec.limits.apply_timeout
                ),
            )),
        }
    }

    /// The user and client the component acts as, when it declares a `serviceAccount`.
    fn identity(
        &self,
        slot: &Slot,
        spec: &Spec,
        namespace: Option<&str>,
    ) -> Result<Option<(String, kube::Client)>, ReconcileError> {
        let Some(account) = &spec.service_account else {
            return Ok(None);
        };
        let refuse =
            |why: String| ReconcileError::new(Reason::ComponentUnavailable, format!("component {}: {why}", slot.name));
        let user = account.user(namespace).ok_or_else(|| {
            refuse(format!(
                "serviceAccount {} names no namespace and the CR has none",
                account.name
            ))
        })?;
        let identities = self.identities.as_ref().ok_or_else(|| {
            refuse(format!(
                "it acts as {user}, and this runtime was started without a configuration to impersonate with"
            ))
        })?;
        let client = identities.client(&user).map_err(refuse)?;
        Ok(Some((user, client)))
    }

    /// Records the events of a response, then (unless it failed) checks every child against
    /// the grants, applies them, deletes the ones no longer returned and reads the status.
    #[expect(clippy::too_many_arguments, reason = "one call's whole context, passed through once")]
    async fn apply_response(
        &self,
        applier: &apply::Applier,
        slot: &Slot,
        spec: &Spec,
        caller: &Caller,
        request: &Request,
        cr: &Value,
        response: Response,
    ) -> Result<Applied, ReconcileError> {
        for event in &response.events {
            interrupted(request)?;
            let reason = guest_reason(&event.reason);
            match event.event_type {
                EventType::Normal => self.events.normal(cr, &reason, event.message.clone()),
                EventType::Warning => self.events.warning(cr, &reason, event.message.clone()),
            }
        }
        if let Outcome::Error(failure) = response.outcome {
            // A failed call changes nothing; its events above explain it.
            return Err(ReconcileError::new(Reason::component(&failure.reason), failure.message));
        }
        let bad =
            |why: String| ReconcileError::new(Reason::ComponentBadResult, format!("component {}: {why}", slot.name));
        let mut applied = Applied {
            status: match &response.status {
                None => None,
                Some(text) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(status)) => Some(status),
                    Ok(other) => return Err(bad(format!("status is {}, not a JSON object", json_type(&other)))),
                    Err(error) => return Err(bad(format!("status is not valid JSON: {error}"))),
                },
            },
            ..Applied::default()
        };
        // Every child is checked before any is applied: a denied one fails the reconcile
        // with nothing written.
        let mut children = Vec::with_capacity(response.resources.len());
        for (i, text) in response.resources.iter().enumerate() {
            let bad = |why: String| bad(format!("resources[{i}]: {why}"));
            let mut child: Value = serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
            if !child["metadata"].is_object() || !matches!(child["metadata"]["labels"], Value::Null | Value::Object(_))
            {
                return Err(bad("needs a metadata object (with labels, if any, as an object)".into()));
            }
            let (api_version, kind, name) = orkestra_wasm::identity(&child).map_err(|e| bad(e.to_string()))?;
            if child["metadata"].get("finalizers").is_some_and(|f| !f.is_null()) {
                // Nothing would ever take it off: the child, and its namespace, would hang.
                return Err(bad(
                    "metadata.finalizers: a component may not put finalizers on what the host applies for it".into(),
                ));
            }
            if let Some(long) = [&api_version, &kind, &name].into_iter().find(|f| f.len() > NAME_LIMIT) {
                return Err(bad(format!(
                    "{} bytes is longer than any Kubernetes name ({NAME_LIMIT})",
                    long.len()
                )));
            }
            let scoped = !applier.is_cluster_scoped(&child).await?;
            if scoped && child["metadata"]["namespace"].as_str().is_none() {
                child["metadata"]["namespace"] = cr["metadata"]["namespace"].clone();
            }
            let access = Access {
                verb: Verb::Apply,
                api_version: &api_version,
                kind: &kind,
                namespace: child["metadata"]["namespace"].as_str().filter(|_| scoped),
            };
            spec.grants.check(access, caller.namespace.as_deref()).map_err(|why| {
                ReconcileError::new(Reason::ComponentForbidden, format!("component {}: {why}", slot.name))
            })?;
            let namespace = child["metadata"]["namespace"]
                .as_str()
                .filter(|_| scoped)
                .unwrap_or_default();
            let identity = [
                api_version,
                kind,
                namespace.to_string(),
                child["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            ];
            children.push((identity, child));
        }
        let listed = Value::from_iter(children.iter().map(|(id, _)| json!(id))).to_string();
        if listed.len() > REMEMBERED_LIMIT {
            return Err(ReconcileError::new(
                Reason::ComponentLimitExceeded,
                format!(
                    "component {}: the list of its {} children would be {} bytes; at most {REMEMBERED_LIMIT} fit on the custom resource",
                    slot.name,
                    children.len(),
                    listed.len()
                ),
            ));
        }
        let mode = apply::Mode {
            create_only: false,
            force: request.compiled.force_conflict,
            owned: true,
            replace: Replace::Never,
            manager: &self.managers.component,
            scaled: false,
        };
        let mut returned: Vec<[String; 4]> = Vec::with_capacity(children.len());
        for (identity, child) in children {
            interrupted(request)?;
            let (live, written) = applier.apply(child, cr, mode).await?;
            applied.wrote |= written;
            applied.add(live);
            returned.push(identity);
        }
        applied.wrote |= self.prune(applier, spec, caller, request, cr, returned).await?;
        applied.action = match response.outcome {
            Outcome::RequeueAfter(ms) => Some(Action::RequeueAfter(std::time::Duration::from_millis(ms))),
            _ => None,
        };
        Ok(applied)
    }

    /// Deletes the children the component returned last time and not this time, and
    /// remembers this time's. The list is read from the CR, which its writer controls, so
    /// each entry must be one the component may delete and a child this CR provably owns;
    /// anything else is left alone. Returns whether it wrote.
    async fn prune(
        &self,
        applier: &apply::Applier,
        spec: &Spec,
        caller: &Caller,
        request: &Request,
        cr: &Value,
        mut returned: Vec<[String; 4]>,
    ) -> Result<bool, ReconcileError> {
        returned.sort();
        returned.dedup();
        let previous = remembered_children(cr, spec.limits.children);
        if previous == returned {
            return Ok(false);
        }
        let (component, key) = (&*caller.component, &request.key);
        for entry in previous.iter().filter(|p| !returned.contains(p)) {
            interrupted(request)?;
            let [api_version, kind, namespace, name] = entry;
            let access = Access {
                verb: Verb::Delete,
                api_version,
                kind,
                namespace: Some(namespace.as_str()).filter(|ns| !ns.is_empty()),
            };
            if let Err(why) = spec.grants.check(access, caller.namespace.as_deref()) {
                tracing::warn!(component, key, %kind, %name, %namespace, "a child the component no longer returns stays: {why}");
                let note = format!("{kind} {name} is no longer returned but stays: {why}");
                self.events.warning(cr, "ChildNotPruned", note);
                continue;
            }
            let mut child = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
            if !namespace.is_empty() {
                child["metadata"]["namespace"] = json!(namespace);
            }
            match applier.delete_child(&child, cr, DeleteParams::background()).await {
                Ok(Deletion::Deleted) => {
                    tracing::info!(component, key, %kind, %name, %namespace, "the component no longer returns this child: deleted");
                }
                Ok(Deletion::Absent) => {}
                Ok(Deletion::Refused(why)) => {
                    tracing::warn!(component, key, %kind, %name, %namespace, "listed as a child, but not deleted: it {why}");
                }
                // A kind the server does not serve holds nothing to delete.
                Err(error) if error.reason == Reason::UnknownKind => {}
                Err(error) => return Err(error),
            }
        }
        let list = json!(returned).to_string();
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
        spec: &Arc<Spec>,
    ) -> Result<orkestra_wasm::Request, ReconcileError> {
        let mut shared = context.clone();
        let mut args = spec.args.clone();
        // The context carries the CR's stamps (`health`, `metrics`) when the Katalog reads them.
        if let Some(object) = object {
            // Args are templates over the CR, like every other Katalog value.
            if let Some(compiled) = &self.args {
                let resolver = Resolver::in_context(object, &self.crd.notes, context);
                let rendered = compiled
                    .tree(spec)
                    .and_then(|tree| tree.render(&resolver).map_err(|e| e.message));
                args = Some(
                    rendered.map_err(|e| ReconcileError::new(Reason::RenderFailed, format!("component args: {e}")))?,
                );
            }
        }
        if let Some(args) = args {
            shared.insert("args".into(), args);
        }
        Ok(orkestra_wasm::Request {
            key: request.key.clone(),
            gvk: Gvk {
                group: self.crd.group.clone(),
                version: self.crd.version.clone(),
                kind: self.crd.kind.clone(),
            },
            target: request.target.clone(),
            object: object.map(|o| match request.object.as_deref() {
                // The CR as the informer holds it (no mutation rule changed it): the text it
                // was parsed from, serialized once when the watch stored this version.
                Some(cached) if std::ptr::eq(cached, o) => request
                    .text
                    .as_deref()
                    .map_or_else(|| orkestra_wasm::json_text(o), str::to_string),
                _ => orkestra_wasm::json_text(o),
            }),
            event_id: request.event_id,
            sentinels: orkestra_expr::sentinel::NAMES
                .iter()
                .enumerate()
                .filter(|(i, _)| request.sentinels.is_set(*i))
                .map(|(_, name)| name.to_string())
                .collect(),
            context: orkestra_wasm::json_text(&Value::Object(shared)),
        })
    }
}

/// The children a component returned last, as the CR remembers them: at most `limit`
/// well-formed entries (a writer of the CR may have put anything there).
fn remembered_children(cr: &Value, limit: usize) -> Vec<[String; 4]> {
    let Some(text) = cr["metadata"]["annotations"][COMPONENT_CHILDREN].as_str() else {
        return Vec::new();
    };
    let Ok(entries) = serde_json::from_str::<Vec<[String; 4]>>(text) else {
        return Vec::new();
    };
    let mut entries: Vec<[String; 4]> = entries
        .into_iter()
        .filter(|entry| entry.iter().all(|field| field.len() <= NAME_LIMIT) && !entry[3].is_empty())
        .take(limit)
        .collect();
    entries.sort();
    entries.dedup();
    entries
}

/// Stops the work of a reconcile whose CR is being deleted or whose runtime is stopping.
fn interrupted(request: &Request) -> Result<(), ReconcileError> {
    match request.interrupt.reason() {
        Some(why) => Err(ReconcileError::new(Reason::Interrupted, why)),
        None => Ok(()),
    }
}

/// What kind of JSON value it is, for a message.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The `Component` condition of the CR `key`: which version serves it (by its digest: the
/// revision counts this process's loads, and would change the condition, a write per CR, at
/// each restart or hand-over to another replica), whether it is a rollout's new version, or
/// why the declared one does not serve.
pub(super) fn component_condition(
    status: &mut Value,
    previous: &Value,
    slot: &Slot,
    key: &str,
    (generation, now): (&Value, jiff::Timestamp),
) -> Option<VersionChange> {
    let serving = slot.serving(key);
    let (state, reason, message) = match (&serving, slot.last_error()) {
        (Some((active, Role::Canary { share })), _) => (
            "True",
            "Canary",
            format!(
                "{} (sha256 {}) serves, the new version of a rollout on {share}% of the CRs",
                slot.name,
                short(&active.loaded.digest)
            ),
        ),
        (Some((active, Role::Stable)), None) => (
            "True",
            "Serving",
            format!("{} (sha256 {}) serves", slot.name, short(&active.loaded.digest)),
        ),
        (Some((active, Role::Stable)), Some(error)) if slot.rolled_back() => (
            "False",
            "RolledBack",
            format!("sha256 {} serves; {error}", short(&active.loaded.digest)),
        ),
        (Some((active, Role::Stable)), Some(error)) => (
            "False",
            "UpdateFailed",
            format!(
                "sha256 {} keeps serving; the new version did not load: {error}",
                short(&active.loaded.digest)
            ),
        ),
        (None, error) => ("False", "LoadFailed", error.unwrap_or_else(|| "not loaded yet".into())),
    };
    let message = bounded(message, super::status::MESSAGE_LIMIT);
    super::status::set_condition(status, ["Component", state, reason, &message], generation, now);
    let before = named_digest(previous)?;
    let after = short(&serving?.0.loaded.digest);
    (before != after).then(|| VersionChange {
        before,
        after,
        step: slot.last_step(),
    })
}

/// The digest a CR's `Component` condition (in `status`) named.
fn named_digest(status: &Value) -> Option<String> {
    let conditions = status["conditions"].as_array()?;
    let message = conditions.iter().find(|c| c["type"] == "Component")?["message"].as_str()?;
    let (_, rest) = message.split_once("sha256 ")?;
    Some(rest.chars().take(12).collect())
}

/// A CR served by another version than at its last reconcile.
pub(super) struct VersionChange {
    before: String,
    after: String,
    /// The slot's last rollout step, which may be what moved it.
    step: Option<Step>,
}

impl VersionChange {
    /// The Event that tells it: warning or not, reason, note.
    pub(super) fn event(&self, slot: &str) -> (bool, &'static str, String) {
        let moved = format!("{slot}: sha256 {} serves this CR (was {})", self.after, self.before);
        let Some(step) = &self.step else {
            return (false, "ComponentSwapped", moved);
        };
        let digest = short(&step.digest);
        match step.step {
            StepKind::Started if digest == self.after => {
                (false, "ComponentCanary", format!("{moved}: {}", step.message))
            }
            StepKind::Promoted if digest == self.after => (
                false,
                "ComponentPromoted",
                format!("{moved}: promoted, {}", step.message),
            ),
            StepKind::RolledBack if digest == self.before => {
                (true, "ComponentRolledBack", format!("{moved}: {}", step.message))
            }
            _ => (false, "ComponentSwapped", moved),
        }
    }
}

/// The reason of a failed call.
fn call_reason(error: &CallError) -> Reason {
    match error {
        CallError::Timeout(_) => Reason::ComponentTimeout,
        CallError::MemoryLimit(_) => Reason::ComponentMemoryLimit,
        CallError::Fuel(_) => Reason::ComponentFuelExhausted,
        CallError::Trapped(_) => Reason::ComponentTrapped,
        CallError::ResultTooLarge { .. } => Reason::ComponentResultTooLarge,
        CallError::Forbidden(_) => Reason::ComponentForbidden,
        CallError::Instantiate(_) => Reason::ComponentUnavailable,
        CallError::TooMany { .. } => Reason::ComponentLimitExceeded,
    }
}

/// A component's `args`, compiled once per declaration. They follow the Katalog live: a
/// reload that declares the component anew (a new [`Spec`]) compiles its args once more.
pub(super) struct ComponentArgs {
    functions: Functions,
    compiled: Mutex<Option<(Arc<Spec>, CompiledArgs)>>,
}

/// Args compiled, or why they do not compile.
type CompiledArgs = Result<Arc<Tree>, String>;

impl ComponentArgs {
    pub(super) fn new(functions: Functions) -> Self {
        Self {
            functions,
            compiled: Mutex::new(None),
        }
    }

    /// The compiled args of `spec` (which has args).
    fn tree(&self, spec: &Arc<Spec>) -> CompiledArgs {
        let mut compiled = self.compiled.lock();
        match &*compiled {
            Some((seen, tree)) if Arc::ptr_eq(seen, spec) => tree.clone(),
            _ => {
                let raw = spec.args.as_ref().unwrap_or(&Value::Null);
                let tree = Tree::compile(raw, &self.functions).map(Arc::new).map_err(|e| e.message);
                *compiled = Some((spec.clone(), tree.clone()));
                tree
            }
        }
    }
}
