//! The declarative reconciler (Katalog templates only). On each reconcile: mark the CR as
//! ours (finalizers, labels, annotations), render and apply its children (`onCreate` once,
//! `onReconcile` with drift correction, DeleteIfOwned for entries whose conditions fail),
//! then write status (Ready with observedGeneration, then the `emit.status` fields in order,
//! `.children` visible), skipping every write whose result is already there so a reconcile
//! never triggers itself. On deletion: the onDelete work, then our finalizers off.

mod apply;
mod component;
mod lifecycle;
mod record;
pub mod render;
pub mod rules;
mod tls;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};

use std::sync::atomic::Ordering;

use crate::compiled::{CompiledBox, CompiledCrd};
use crate::condition::ValueType;
use crate::cross::Peers;
use crate::kordinator::Counters;
use crate::mux::{Action, Form, INTERRUPTED, ReconcileError, Reconciler, Request};
use crate::observe::{Children, api_for_key, split_key};
use crate::resolver::Resolver;
use crate::template::{Functions, Template};
use crate::wasm::{Hook, Slot, World};

/// The declarative reconciler of one CRD.
pub struct Declarative {
    client: kube::Client,
    crd: Arc<CompiledCrd>,
    applier: apply::Applier,
    events: record::Events,
    counters: Arc<Counters>,
    peers: Peers,
    http: reqwest::Client,
    /// The Wasm component of this CRD or target: hooks, or a constructor.
    component: Option<Arc<Slot>>,
    /// Compiles the component's `args` templates (they follow the Katalog live).
    functions: Option<Functions>,
    managers: Managers,
}

/// The field managers of this reconciler's writes: one per CRD for its templates, one per
/// component, so tenants never share one and `managedFields` says who wrote what.
struct Managers {
    templates: String,
    component: String,
}

/// How often a CR being deleted looks again at its onDelete Jobs or ordered groups.
const CLEANUP_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Longest Ready message, as upstream (253 characters and "...").
const MESSAGE_LIMIT: usize = 256;

impl Declarative {
    /// `counters.writes` counts every write this reconciler makes.
    pub fn new(
        client: kube::Client,
        crd: Arc<CompiledCrd>,
        counters: Arc<Counters>,
        peers: Peers,
        http: reqwest::Client,
    ) -> Self {
        Self {
            peers,
            http,
            applier: apply::Applier::new(client.clone(), counters.clone()),
            events: record::Events::new(client.clone()),
            client,
            counters,
            managers: Managers {
                templates: crate::ownership::field_manager("orkestra", &crd.crd_name(), None),
                component: crate::ownership::field_manager("orkestra-wasm", &crd.crd_name(), None),
            },
            component: None,
            functions: None,
            crd,
        }
    }

    /// Reads existing children from `children` (the owned-kind watches) where it holds them,
    /// instead of asking the API server.
    pub fn with_children(mut self, children: Children) -> Self {
        self.applier = self.applier.with_children(children);
        self
    }

    /// Runs `slot`'s component: hooks around the templates, or a constructor instead of them;
    /// its `args` templates compile with `functions`.
    pub fn with_component(mut self, slot: Arc<Slot>, functions: Functions) -> Self {
        let target = slot.name.split_once('/').map(|(_, target)| target);
        self.managers.component = crate::ownership::field_manager("orkestra-wasm", &self.crd.crd_name(), target);
        self.component = Some(slot);
        self.functions = Some(functions);
        self
    }

    fn is_constructor(&self) -> bool {
        self.component
            .as_ref()
            .is_some_and(|s| s.declared().world == World::Constructor)
    }

    async fn run(&self, request: &Request) -> Result<Action, ReconcileError> {
        let Some(object) = &request.object else {
            if let Some(slot) = &self.component {
                self.call_component(slot, Hook::NotFound, request, None, &Map::new())
                    .await?;
            }
            return Ok(Action::Done);
        };
        let (compiled, _) = self.crd.for_object(object);
        if !object["metadata"]["deletionTimestamp"].is_null() {
            return self.finalize(request, compiled, object).await;
        }
        let now = jiff::Timestamp::now();
        let (mutated, verdict) = self.crd.rules.run(object, &self.crd.notes);
        let mut context = Map::new();
        if !compiled.cross.is_empty() {
            let resolver = Resolver::new(&mutated, &self.crd.notes);
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
            context.insert(
                "cross".into(),
                self.peers.read_all(&compiled.cross, &resolver, namespace),
            );
        }
        let outcome = match self.call_externals(compiled, &mutated, &mut context).await {
            Ok(()) => self.apply_all(request, object, &mutated, &verdict, &context, now).await,
            Err(error) => Err(error),
        };
        if let Err(error) = &outcome
            && error.reason == INTERRUPTED
        {
            // Nothing half-done is recorded: the run that handles the deletion (or the next
            // start) is already due.
            tracing::debug!(key = %request.key, why = %error.message, "reconcile stopped early");
            return Ok(Action::Done);
        }
        if let Ok(done) = &outcome {
            context.insert("children".into(), done.children.clone());
        }
        let mut status = match &outcome {
            Ok(done) => {
                let mut status = desired_status(compiled, &mutated, &self.crd.notes, now, &context);
                for (key, value) in done.status.iter().flatten() {
                    if key != "conditions" && key != "observedGeneration" {
                        status[key.as_str()] = value.clone();
                    }
                }
                status
            }
            Err(error) => failed_status(object, error, now),
        };
        if self.crd.rules.validates() {
            validation_conditions(&mut status, &verdict, &object["metadata"]["generation"], now);
        }
        if let Some(slot) = &self.component {
            component::component_condition(&mut status, slot, &object["metadata"]["generation"], now);
        }
        let status_written = self.patch_status(request, object, status).await?;
        let kind = &self.crd.kind;
        match outcome {
            Ok(done) => {
                // Only a reconcile that changed something reports: a resync of a settled CR
                // stays silent, as it writes nothing either.
                if done.wrote || status_written {
                    let note = format!("{kind} {} reconciled", request.key);
                    self.events.normal(object, &format!("{kind}Reconciled"), note);
                    self.emit_declared(compiled, &mutated, &context, None).await;
                }
                Ok(done.action.unwrap_or(Action::Done))
            }
            Err(error) => {
                self.events
                    .warning(object, &format!("{kind}ReconcileError"), error.to_string());
                self.emit_declared(compiled, &mutated, &context, Some(&error)).await;
                Err(error)
            }
        }
    }

    /// The `emit.events` whose `on` and conditions match this outcome; the reconcile's context
    /// (`.cross`, `.external`, `.children` on success) and `.error` on failure are visible.
    async fn emit_declared(
        &self,
        compiled: &CompiledBox,
        object: &Value,
        context: &Map<String, Value>,
        error: Option<&ReconcileError>,
    ) {
        if compiled.events.is_empty() {
            return;
        }
        let mut resolver = with_context(Resolver::new(object, &self.crd.notes), context);
        if let Some(error) = error {
            resolver.set("error", json!(error.to_string()));
        }
        for event in compiled.events.iter().filter(|e| e.fires_on(error.is_none())) {
            if !event.conditions.passes(&resolver, None) {
                continue;
            }
            match (resolver.render(&event.reason), resolver.render(&event.message)) {
                (Ok(reason), Ok(message)) if event.warning => self.events.warning(object, &reason, message),
                (Ok(reason), Ok(message)) => self.events.normal(object, &reason, message),
                (Err(error), _) | (_, Err(error)) => {
                    tracing::warn!(event = %event.name, error = %error.message, "emit.events entry did not render");
                }
            }
        }
    }

    /// The external calls of the blocks whose gate passes, into `context["external"]`.
    async fn call_externals(
        &self,
        compiled: &CompiledBox,
        object: &Value,
        context: &mut Map<String, Value>,
    ) -> Result<(), ReconcileError> {
        let blocks = [&compiled.on_create, &compiled.on_reconcile];
        if blocks.iter().flat_map(|b| b.iter()).all(|b| b.external.is_empty()) {
            return Ok(());
        }
        let mut resolver = with_context(Resolver::new(object, &self.crd.notes), context);
        for block in blocks.into_iter().flatten().filter(|b| !b.external.is_empty()) {
            if block.conditions.passes(&resolver, None) {
                let outcome = crate::external::run(&self.http, &block.external, &mut resolver).await;
                outcome.map_err(|e| ReconcileError::new("ExternalCallFailed", e))?;
            }
        }
        if let Some(results) = resolver.lookup("external") {
            context.insert("external".into(), results.clone());
        }
        Ok(())
    }

    /// Bookkeeping, the mutated fields, then (unless a deny rule failed) the children: the
    /// templates' and the component's.
    async fn apply_all(
        &self,
        request: &Request,
        object: &Value,
        mutated: &Value,
        verdict: &rules::Verdict,
        context: &Map<String, Value>,
        now: jiff::Timestamp,
    ) -> Result<Done, ReconcileError> {
        let wrote = self.write_metadata(request, object, mutated, now).await?;
        if !verdict.denied.is_empty() {
            return Err(ReconcileError::new("ValidationFailed", verdict.denied.join("; ")));
        }
        let (compiled, _) = self.crd.for_object(object);
        let Some(slot) = &self.component else {
            let (children, applied) = self.children(compiled, mutated, context).await?;
            return Ok(Done {
                children: Value::Object(children),
                wrote: wrote || applied,
                status: None,
                action: None,
            });
        };
        if self.is_constructor() {
            let called = self
                .call_component(slot, Hook::Reconcile, request, Some(mutated), context)
                .await?;
            return Ok(Done::from_call(called, Map::new(), wrote));
        }
        let first = slot.active().is_some_and(|a| a.spec.run_first);
        let before = if first {
            Some(
                self.call_component(slot, Hook::Reconcile, request, Some(mutated), context)
                    .await?,
            )
        } else {
            None
        };
        let (children, applied) = self.children(compiled, mutated, context).await?;
        let called = match before {
            Some(called) => called,
            None => {
                // After the templates, the hook sees what they applied.
                let mut seen = context.clone();
                seen.insert("children".into(), Value::Object(children.clone()));
                self.call_component(slot, Hook::Reconcile, request, Some(mutated), &seen)
                    .await?
            }
        };
        Ok(Done::from_call(called, children, wrote || applied))
    }

    /// One write for everything the CR itself needs: finalizers, the managed label, CRD
    /// labels and the managed-by/-since annotations, the fields mutation rules set (persisted,
    /// so users and other controllers see them), and, riding along, the runtime's stamps.
    /// Nothing when all is in place. Returns whether it wrote. The patch carries the
    /// resourceVersion, so a finalizer list changed by someone else in between is a conflict
    /// and a retry, never a lost entry.
    async fn write_metadata(
        &self,
        request: &Request,
        object: &Value,
        mutated: &Value,
        now: jiff::Timestamp,
    ) -> Result<bool, ReconcileError> {
        let resolver = Resolver::new(object, &self.crd.notes);
        let bookkeeping = lifecycle::bookkeeping_patch(&self.crd, object, &resolver, now)
            .map_err(|e| ReconcileError::new("RenderFailed", e))?;
        let mutation = added_fields(object, mutated);
        let added = bookkeeping
            .as_ref()
            .is_some_and(|p| p["metadata"]["finalizers"].is_array() && !self.crd.remove_finalizers);
        let mut patch = match (mutation, bookkeeping) {
            (None, None) => return Ok(false),
            (Some(mut patch), Some(bookkeeping)) => {
                render::merge(&mut patch, bookkeeping);
                patch
            }
            (Some(patch), None) | (None, Some(patch)) => patch,
        };
        for (annotation, stamp) in request.stamps.annotations().into_iter().flatten() {
            patch["metadata"]["annotations"][annotation] = stamp.clone();
        }
        patch["metadata"]["resourceVersion"] = object["metadata"]["resourceVersion"].clone();
        self.patch_object(request, patch).await?;
        request.stamps.mark_written();
        if added {
            let note = format!("finalizers {} in place", self.crd.finalizers.join(", "));
            self.events
                .normal(object, &format!("{}FinalizerAdded", self.crd.kind), note);
        }
        Ok(true)
    }

    /// The deletion path: onDelete work (or the cluster-scoped children, which no owner
    /// reference collects), then our finalizers off, others' kept.
    async fn finalize(
        &self,
        request: &Request,
        compiled: &CompiledBox,
        object: &Value,
    ) -> Result<Action, ReconcileError> {
        let current = lifecycle::finalizers(object);
        let remaining: Vec<&String> = current
            .iter()
            .filter(|f| !self.crd.finalizers.contains(f) && f.as_str() != lifecycle::LEGACY_FINALIZER)
            .collect();
        if remaining.len() == current.len() {
            return Ok(Action::Done);
        }
        let kind = &self.crd.kind;
        self.events
            .normal(object, "Deleting", format!("cleaning up {kind} {}", request.key));
        if let Some(slot) = &self.component {
            let called = self
                .call_component(slot, Hook::Delete, request, Some(object), &Map::new())
                .await;
            let held = match called {
                Ok(done) => match done.action {
                    Some(action) => Held::Waiting(action),
                    None => Held::Done,
                },
                Err(error) if error.reason == INTERRUPTED => return Ok(Action::Done),
                Err(error) => Held::Failed(error),
            };
            if let Some(action) = self.hold_finalizer(request, slot, object, held).await? {
                return Ok(action);
            }
        }
        let cleaned = if self.is_constructor() {
            // A constructor's children are collected by their owner references.
            Ok(true)
        } else {
            self.clean_up(compiled, object).await
        };
        match cleaned {
            Ok(true) => {}
            Ok(false) => return Ok(Action::RequeueAfter(CLEANUP_POLL)),
            Err(error) => {
                self.events
                    .warning(object, &format!("{kind}DeleteError"), error.to_string());
                return Err(error);
            }
        }
        let patch = json!({"metadata": {
            "finalizers": remaining, "resourceVersion": object["metadata"]["resourceVersion"],
        }});
        self.patch_object(request, patch).await?;
        self.events.normal(
            object,
            &format!("{kind}Deleted"),
            format!("{kind} {} cleaned up", request.key),
        );
        Ok(Action::Done)
    }

    /// Whether a component's on-delete (or finalize) keeps the finalizer: while it fails or
    /// asks to wait, up to its `deletion.timeout` from the deletionTimestamp; then
    /// `deletion.onTimeout` decides between DeletionBlocked and letting the finalizer go. A
    /// failure shows on Ready either way. `None`: go on with the deletion.
    async fn hold_finalizer(
        &self,
        request: &Request,
        slot: &Slot,
        object: &Value,
        held: Held,
    ) -> Result<Option<Action>, ReconcileError> {
        let why = match held {
            Held::Done => return Ok(None),
            Held::Waiting(action) => Err(action),
            Held::Failed(error) => Ok(error),
        };
        let policy = slot.active().map_or(slot.declared().deletion, |a| a.spec.deletion);
        let kind = &self.crd.kind;
        let now = jiff::Timestamp::now();
        let waited = deleting_for(object, now);
        if waited < policy.timeout {
            let error = match why {
                Err(action) => return Ok(Some(action)),
                Ok(error) => error,
            };
            self.note_failure(request, object, &error, now).await;
            self.events
                .warning(object, &format!("{kind}DeleteError"), error.to_string());
            return Err(error);
        }
        let cause = match &why {
            Ok(error) => error.to_string(),
            Err(_) => "it still asks to wait".to_string(),
        };
        let timeout = crate::duration::format_go(policy.timeout.as_secs_f64());
        if policy.release {
            let note = format!(
                "on-delete did not succeed within {timeout} ({cause}); the finalizer is released (deletion.onTimeout: release)"
            );
            self.events.warning(object, &format!("{kind}FinalizerReleased"), note);
            return Ok(None);
        }
        let blocked = ReconcileError::new(
            "DeletionBlocked",
            format!(
                "on-delete has not succeeded within {timeout} ({cause}); the finalizer stays (deletion.onTimeout: block)"
            ),
        );
        self.note_failure(request, object, &blocked, now).await;
        self.events
            .warning(object, &format!("{kind}DeleteError"), blocked.to_string());
        Err(blocked)
    }

    /// Ready=False with `error`, written if it is not already there (best effort: the
    /// reconcile fails either way).
    async fn note_failure(&self, request: &Request, object: &Value, error: &ReconcileError, now: jiff::Timestamp) {
        let status = failed_status(object, error, now);
        if let Err(failed) = self.patch_status(request, object, status).await {
            tracing::debug!(key = %request.key, error = %failed, "could not write the failure on the custom resource");
        }
    }

    /// Returns false while an onDelete Job is still running.
    async fn clean_up(&self, compiled: &CompiledBox, object: &Value) -> Result<bool, ReconcileError> {
        let resolver = Resolver::new(object, &self.crd.notes);
        if let Some(block) = &compiled.on_delete {
            // A failing block gate means: no cleanup, the finalizer goes at once.
            if !block.conditions.passes(&resolver, None) {
                return Ok(true);
            }
            if !block.groups.is_empty() {
                return self.delete_in_order(block, object, &resolver).await;
            }
            let mut finished = true;
            for entry in &block.entries {
                for scoped in expand(entry, &resolver) {
                    if !entry.conditions.passes(&scoped, None) {
                        continue;
                    }
                    if entry.kind.key == "jobs" {
                        let rendered = entry
                            .render(&scoped, object)
                            .map_err(|e| ReconcileError::new("RenderFailed", format!("onDelete.jobs: {e}")))?;
                        let mode = apply::Mode {
                            create_only: true,
                            force: false,
                            owned: false,
                            replace: render::Replace::Never,
                            manager: &self.managers.templates,
                        };
                        let (live, _) = self.applier.apply(rendered, object, mode).await?;
                        finished &= lifecycle::job_finished(&live);
                    } else {
                        self.applier
                            .delete_if_owned(&child_ref(entry, &scoped, object)?, object)
                            .await?;
                    }
                }
            }
            return Ok(finished);
        }
        for block in [&compiled.on_create, &compiled.on_reconcile].into_iter().flatten() {
            for entry in &block.entries {
                for scoped in expand(entry, &resolver) {
                    let child = child_ref(entry, &scoped, object)?;
                    if self.applier.is_cluster_scoped(&child).await? {
                        self.applier.delete_if_owned(&child, object).await?;
                    }
                }
            }
        }
        Ok(true)
    }

    /// Ordered deletion: the first group with an object of ours left is deleted (foreground)
    /// and polled; later groups wait. Past the block's deadline, counted from the CR's
    /// deletionTimestamp, it fails and the finalizer stays.
    async fn delete_in_order(
        &self,
        block: &render::Block,
        object: &Value,
        resolver: &Resolver<'_, '_>,
    ) -> Result<bool, ReconcileError> {
        for group in block.groups.iter().filter(|g| g.conditions.passes(resolver, None)) {
            let mut present = false;
            for entry in &group.entries {
                for scoped in expand(entry, resolver) {
                    let child = child_ref(entry, &scoped, object)?;
                    present |= self.applier.delete_if_owned_foreground(&child, object).await?;
                }
            }
            if present {
                let waited = deleting_for(object, jiff::Timestamp::now());
                if waited > block.timeout {
                    return Err(ReconcileError::new(
                        "DeletionTimedOut",
                        format!(
                            "ordered deletion still waiting after {}s; the finalizer stays",
                            block.timeout.as_secs()
                        ),
                    ));
                }
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn patch_object(&self, request: &Request, patch: Value) -> Result<(), ReconcileError> {
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.api(request)
            .patch(split_key(&request.key).1, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| ReconcileError::new("MetadataPatchFailed", e.to_string()))?;
        Ok(())
    }

    fn api(&self, request: &Request) -> Api<DynamicObject> {
        api_for_key(&self.client, &request.resource, &request.key).0
    }

    /// Applies the templates; returns `.children` (the applied objects by lowercase kind) and
    /// whether anything was written.
    async fn children(
        &self,
        compiled: &CompiledBox,
        object: &Value,
        context: &Map<String, Value>,
    ) -> Result<(Map<String, Value>, bool), ReconcileError> {
        let mut children = Map::new();
        let mut wrote = false;
        let resolver = with_context(Resolver::new(object, &self.crd.notes), context);
        for (block, is_create) in [(&compiled.on_create, true), (&compiled.on_reconcile, false)] {
            let Some(block) = block else { continue };
            if !block.conditions.passes(&resolver, None) {
                continue;
            }
            // Names applied by a passing entry are safe from DeleteIfOwned of a failing one.
            let mut kept: Vec<(&str, String)> = Vec::new();
            let mut failing: Vec<(&render::Entry, Resolver<'_, '_>)> = Vec::new();
            for entry in &block.entries {
                for scoped in expand(entry, &resolver) {
                    if entry.conditions.passes(&scoped, None) {
                        let rendered = entry
                            .render(&scoped, object)
                            .map_err(|e| ReconcileError::new("RenderFailed", format!("{}: {e}", entry.kind.key)))?;
                        kept.push((
                            entry.kind.key,
                            rendered["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                        ));
                        let mode = apply::Mode {
                            create_only: entry.create_only(),
                            force: entry.force.unwrap_or(compiled.force_conflict),
                            owned: true,
                            replace: entry.replace,
                            manager: &self.managers.templates,
                        };
                        let (live, written) = self.applier.apply(rendered, object, mode).await?;
                        wrote |= written;
                        let key = live["kind"].as_str().unwrap_or(entry.kind.kind).to_lowercase();
                        children.entry(key).or_insert(live);
                    } else if !is_create && entry.reconcile {
                        failing.push((entry, scoped));
                    }
                }
            }
            for (entry, scoped) in failing {
                let target = child_ref(entry, &scoped, object)?;
                let name = target["metadata"]["name"].as_str().unwrap_or_default();
                if kept
                    .iter()
                    .any(|(kind, kept_name)| *kind == entry.kind.key && kept_name == name)
                {
                    continue;
                }
                if self.applier.delete_if_owned(&target, object).await? {
                    wrote = true;
                    tracing::info!(kind = %target["kind"], %name, "condition no longer holds: deleted the child we own");
                }
            }
        }
        Ok((children, wrote))
    }

    /// Writes `status` unless it is already there; returns whether it wrote.
    async fn patch_status(&self, request: &Request, object: &Value, status: Value) -> Result<bool, ReconcileError> {
        if object.get("status") == Some(&status) || (object.get("status").is_none() && status == json!({})) {
            return Ok(false);
        }
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.api(request)
            .patch_status(
                split_key(&request.key).1,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .map_err(|e| ReconcileError::new("StatusPatchFailed", e.to_string()))?;
        Ok(true)
    }
}

/// apiVersion, kind, name and namespace of an entry's object, to find or delete it. Custom
/// entries carry their kind in the template, so only they are rendered whole.
fn child_ref(entry: &render::Entry, scoped: &Resolver<'_, '_>, cr: &Value) -> Result<Value, ReconcileError> {
    let failed = |e: String| ReconcileError::new("RenderFailed", format!("{}: {e}", entry.kind.key));
    if entry.kind.api_version.is_empty() {
        let rendered = entry.render(scoped, cr).map_err(failed)?;
        return Ok(json!({
            "apiVersion": rendered["apiVersion"], "kind": rendered["kind"],
            "metadata": {"name": rendered["metadata"]["name"], "namespace": rendered["metadata"]["namespace"]},
        }));
    }
    let name = entry
        .render_name(scoped, cr["metadata"]["name"].as_str().unwrap_or_default())
        .map_err(failed)?;
    Ok(json!({
        "apiVersion": entry.kind.api_version, "kind": entry.kind.kind,
        "metadata": {"name": name, "namespace": cr["metadata"]["namespace"]},
    }))
}

/// `resolver` with the reconcile's context entries (`.cross`, `.children`) added.
fn with_context<'o, 'n>(mut resolver: Resolver<'o, 'n>, context: &Map<String, Value>) -> Resolver<'o, 'n> {
    for (key, value) in context {
        resolver.set(key, value.clone());
    }
    resolver
}

/// One resolver per element for a `forEach` entry (`.item` and `.<as>`), else one.
fn expand<'o, 'n>(entry: &render::Entry, resolver: &Resolver<'o, 'n>) -> Vec<Resolver<'o, 'n>> {
    let mut base = resolver.clone();
    if let Some(inputs) = &entry.inputs {
        base.set("inputs", inputs.clone());
    }
    let Some((path, alias)) = &entry.for_each else {
        return vec![base];
    };
    let items = resolver
        .lookup(path)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    items
        .into_iter()
        .map(|item| {
            let mut scoped = base.clone();
            if let Some(alias) = alias {
                scoped.set(alias, item.clone());
            }
            scoped.set("item", item);
            scoped
        })
        .collect()
}

/// A merge patch holding the fields `mutated` sets or changes against `object` (status
/// aside: it has its own subresource); `None` when there are none.
fn added_fields(object: &Value, mutated: &Value) -> Option<Value> {
    match (object, mutated) {
        (Value::Object(old), Value::Object(new)) => {
            let patch: Map<String, Value> = new
                .iter()
                .filter(|(key, _)| key.as_str() != "status")
                .filter_map(|(key, value)| {
                    let changed = match old.get(key) {
                        Some(previous) => added_fields(previous, value),
                        None => Some(value.clone()),
                    };
                    changed.map(|c| (key.clone(), c))
                })
                .collect();
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (old, new) => (old != new).then(|| new.clone()),
    }
}

/// Sets one condition in `status.conditions`, Ready kept first; `lastTransitionTime` moves
/// only when the condition's status changes.
fn set_condition(status: &mut Value, condition: [&str; 4], generation: &Value, now: jiff::Timestamp) {
    let [kind, state, reason, message] = condition;
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    let position = conditions.iter().position(|c| c["type"] == kind);
    let since = match position.map(|i| &conditions[i]) {
        Some(previous) if previous["status"] == state => previous["lastTransitionTime"].clone(),
        _ => json!(crate::calendar::rfc3339(now)),
    };
    let condition = json!({
        "type": kind, "status": state, "reason": reason, "message": message,
        "lastTransitionTime": since, "observedGeneration": generation,
    });
    match position {
        Some(i) => conditions[i] = condition,
        None if kind == "Ready" => conditions.insert(0, condition),
        None => conditions.push(condition),
    }
    status["conditions"] = Value::Array(conditions);
}

/// ValidationFailed (deny rules) and ValidationWarning (warn rules).
fn validation_conditions(status: &mut Value, verdict: &rules::Verdict, generation: &Value, now: jiff::Timestamp) {
    let denied = verdict.denied.join("; ");
    let failed = match denied.is_empty() {
        true => ["ValidationFailed", "False", "ValidationPassed", ""],
        false => ["ValidationFailed", "True", "DenyRuleViolation", &denied],
    };
    set_condition(status, failed, generation, now);
    let warnings = verdict.warnings.join("; ");
    let warned = match warnings.is_empty() {
        true => ["ValidationWarning", "False", "NoWarnings", ""],
        false => ["ValidationWarning", "True", "WarnRuleViolation", &warnings],
    };
    set_condition(status, warned, generation, now);
}

/// The status after a failed reconcile: Ready=False with the reason and a bounded message.
fn failed_status(object: &Value, error: &ReconcileError, now: jiff::Timestamp) -> Value {
    let mut status = object
        .get("status")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    // The failure's own reason (NotOwned, ComponentTimeout, ...) tells users more than a
    // generic one; upstream says ReconcileError.
    let message = crate::text::bounded(error.message.clone(), MESSAGE_LIMIT);
    set_condition(
        &mut status,
        ["Ready", "False", &error.reason, &message],
        &object["metadata"]["generation"],
        now,
    );
    status
}

/// What a component's on-delete said about the finalizer.
enum Held {
    /// Let it go.
    Done,
    /// Keep it and run again.
    Waiting(Action),
    Failed(ReconcileError),
}

/// How long the CR has been being deleted (zero if it is not, or the time is unreadable).
fn deleting_for(object: &Value, now: jiff::Timestamp) -> std::time::Duration {
    object["metadata"]["deletionTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map_or(std::time::Duration::ZERO, |since| {
            now.duration_since(since).unsigned_abs()
        })
}

/// What a successful reconcile did.
struct Done {
    /// `.children`.
    children: Value,
    wrote: bool,
    /// Status fields a component returned.
    status: Option<Map<String, Value>>,
    action: Option<Action>,
}

impl Done {
    fn from_call(called: component::Applied, mut children: Map<String, Value>, wrote: bool) -> Self {
        for (kind, child) in called.children {
            children.entry(kind).or_insert(child);
        }
        Self {
            children: Value::Object(children),
            wrote: wrote || called.wrote,
            status: called.status,
            action: called.action,
        }
    }
}

impl Reconciler for Declarative {
    fn form(&self) -> Form {
        match &self.component {
            None => Form::Declarative,
            Some(_) if self.is_constructor() => Form::Constructor,
            Some(_) => Form::Hybrid,
        }
    }

    fn reconcile<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Action, ReconcileError>> {
        Box::pin(self.run(request))
    }
}

/// The status a successful reconcile leaves: conditions and fields over the current status.
/// Conditions of fields are evaluated against the object as it was (a state machine reads
/// the phase it is in, not the one it is writing).
pub fn desired_status(
    compiled: &CompiledBox,
    object: &Value,
    notes: &[Template],
    now: jiff::Timestamp,
    context: &Map<String, Value>,
) -> Value {
    let mut status = object
        .get("status")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    if compiled.status_conditions {
        let generation = object["metadata"]["generation"].clone();
        status["observedGeneration"] = generation.clone();
        set_condition(
            &mut status,
            ["Ready", "True", "ReconcileSucceeded", ""],
            &generation,
            now,
        );
    }
    let resolver = with_context(Resolver::new(object, notes).at(now), context);
    for field in &compiled.status_fields {
        let value = if field.conditions.is_empty() || field.conditions.passes(&resolver, None) {
            typed(&resolver, &field.value, field.value_type)
        } else if field.clear_on_false {
            Some(json!(""))
        } else {
            None
        };
        if let Some(value) = value {
            set_path(&mut status, &field.path, value);
        }
    }
    status
}

/// A field's value in its declared type; `None` (and a warning) when it does not convert.
fn typed(resolver: &Resolver<'_, '_>, template: &Template, value_type: ValueType) -> Option<Value> {
    let text = match value_type {
        ValueType::Auto => return resolver.evaluate(template).ok(),
        _ => resolver.render(template).ok()?,
    };
    let value = match value_type {
        ValueType::String | ValueType::Auto => Some(Value::String(text.clone())),
        ValueType::Int => text.trim().parse::<i64>().ok().map(Value::from),
        ValueType::Float => text
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        ValueType::Bool => match text.trim() {
            "true" => Some(Value::Bool(true)),
            "false" | "" => Some(Value::Bool(false)),
            _ => None,
        },
    };
    if value.is_none() {
        tracing::warn!(value = %text, ?value_type, "status field does not convert to its type; left as it was");
    }
    value
}

fn set_path(root: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = root;
    for segment in parents {
        if !current[segment.as_str()].is_object() {
            current[segment.as_str()] = Value::Object(Map::new());
        }
        current = &mut current[segment.as_str()];
    }
    current[last.as_str()] = value;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiled::compile_for_test as crd;

    const STATE_MACHINE: &str = "        emit:
          status:
            fields:
              - {path: phase, value: Pending, when: [{field: status.phase, notExists: true}]}
              - {path: phase, value: Running, when: [{field: status.phase, equals: Pending}]}
              - {path: replicas, type: int, value: '{{ .spec.replicas }}'}
              - {path: detail.ready, type: bool, value: '{{ gt .spec.replicas 0 }}'}
              - {path: note, value: busy, clearOnFalse: true, when: [{field: status.phase, equals: Running}]}
";

    #[test]
    fn status_fields_apply_in_order_with_types_and_the_ready_condition() {
        let crd = crd(STATE_MACHINE);
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let object = json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}});
        let status = desired_status(crd.crd_box(), &object, &[], now, &Map::new());
        assert_eq!(status["phase"], "Pending");
        assert_eq!(status["replicas"], 2);
        assert_eq!(status["detail"]["ready"], true);
        assert_eq!(status["note"], "", "clearOnFalse writes empty");
        assert_eq!(status["observedGeneration"], 3);
        assert_eq!(status["conditions"][0]["type"], "Ready");
        assert_eq!(status["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");

        // The next reconcile moves the machine on, and keeps the condition's transition time.
        let object = json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}, "status": status});
        let later: jiff::Timestamp = "2026-01-02T00:00:00Z".parse().unwrap();
        let next = desired_status(crd.crd_box(), &object, &[], later, &Map::new());
        assert_eq!(next["phase"], "Running");
        assert_eq!(next["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");

        // A steady state yields the same status: no PATCH.
        let steady =
            json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}, "status": next.clone()});
        let again = desired_status(crd.crd_box(), &steady, &[], later, &Map::new());
        assert_eq!(
            desired_status(
                crd.crd_box(),
                &json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}, "status": again.clone()}),
                &[],
                later,
                &Map::new()
            ),
            again
        );
    }

    #[test]
    fn conditions_can_be_switched_off() {
        let crd = crd("        emit:\n          status:\n            conditions: false\n");
        let status = desired_status(
            crd.crd_box(),
            &json!({"metadata": {"generation": 1}}),
            &[],
            jiff::Timestamp::now(),
            &Map::new(),
        );
        assert_eq!(status, json!({}));
    }
}
