//! Deleting a CR: the component's on-delete (held to its deadline and policy), the
//! onDelete block (Jobs and ordered groups, polled until done), then our finalizers off.

use serde_json::{Map, Value, json};

use super::status::failed_status;
use super::{Declarative, apply, child_refs, expand, lifecycle};
use crate::outcome::failure::{Reason, ReconcileError};
use crate::pipeline::mux::{Action, Request};
use crate::pipeline::render::Render;
use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::CompiledBox;
use orkestra_katalog::compile::{Block, Entry, Replace};
use orkestra_wasm::{Hook, Slot};

/// How often a CR being deleted looks again at its onDelete Jobs or ordered groups.
const CLEANUP_POLL: std::time::Duration = std::time::Duration::from_secs(2);

impl Declarative {
    /// The deletion path: onDelete work (or the cluster-scoped children, which no owner
    /// reference collects), then our finalizers off, others' kept.
    pub(super) async fn finalize(
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
                .call_component(slot, Hook::Delete, request, Some(object), &request.context)
                .await;
            let held = match called {
                Ok(done) => match done.action {
                    Some(action) => Held::Waiting(action),
                    None => Held::Done,
                },
                Err(error) if error.reason == Reason::Interrupted => return Ok(Action::Done),
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
            self.clean_up(compiled, object, &request.context).await
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
        let timeout = orkestra_expr::duration::format_go(policy.timeout.as_secs_f64());
        if policy.release {
            let note = format!(
                "on-delete did not succeed within {timeout} ({cause}); the finalizer is released (deletion.onTimeout: release)"
            );
            self.events.warning(object, &format!("{kind}FinalizerReleased"), note);
            return Ok(None);
        }
        let blocked = ReconcileError::new(
            Reason::DeletionBlocked,
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
    async fn clean_up(
        &self,
        compiled: &CompiledBox,
        object: &Value,
        context: &Map<String, Value>,
    ) -> Result<bool, ReconcileError> {
        let resolver = Resolver::in_context(object, &self.crd.notes, context);
        if let Some(block) = &compiled.on_delete {
            // A failing block gate means: no cleanup, the finalizer goes at once.
            if !block.conditions.passes(&resolver, None) {
                return Ok(true);
            }
            if !block.groups.is_empty() {
                return self.delete_in_order(block, compiled, object, &resolver).await;
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
                            .map_err(|e| ReconcileError::new(Reason::RenderFailed, format!("{}: {e}", entry.at)))?;
                        let mode = apply::Mode {
                            create_only: true,
                            force: false,
                            owned: false,
                            replace: Replace::Never,
                            manager: &self.managers.templates,
                            scaled: false,
                        };
                        let (live, _) = self.applier.apply(rendered, object, mode).await?;
                        finished &= lifecycle::job_finished(&live);
                    } else {
                        for child in refs_to_clean(entry, &scoped, object, compiled)? {
                            self.applier.delete_if_owned(&child, object).await?;
                        }
                    }
                }
            }
            return Ok(finished);
        }
        // What no owner reference collects: cluster-scoped children and those in another
        // namespace (`namespace`, `toNamespaces`, with the copies a shorter list left behind).
        let own = object["metadata"]["namespace"].as_str();
        for block in [&compiled.on_create, &compiled.on_reconcile].into_iter().flatten() {
            for entry in &block.entries {
                for scoped in expand(entry, &resolver) {
                    for child in refs_to_clean(entry, &scoped, object, compiled)? {
                        if child["metadata"]["namespace"].as_str() != own
                            || self.applier.is_cluster_scoped(&child).await?
                        {
                            self.applier.delete_if_owned(&child, object).await?;
                        }
                        if entry.fields.contains_key("toNamespaces") {
                            self.applier.prune_copies(&child, object, &[]).await?;
                        }
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
        block: &Block,
        compiled: &CompiledBox,
        object: &Value,
        resolver: &Resolver<'_, '_>,
    ) -> Result<bool, ReconcileError> {
        for group in block.groups.iter().filter(|g| g.conditions.passes(resolver, None)) {
            let mut present = false;
            for entry in &group.entries {
                for scoped in expand(entry, resolver) {
                    for child in refs_to_clean(entry, &scoped, object, compiled)? {
                        present |= self.applier.delete_if_owned_foreground(&child, object).await?;
                    }
                }
            }
            if present {
                let waited = deleting_for(object, jiff::Timestamp::now());
                if waited > block.timeout {
                    return Err(ReconcileError::new(
                        Reason::DeletionTimedOut,
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
}

/// The objects of `entry` to delete with the CR. A namespace the CR may not pick was never
/// written, so there is nothing of ours there to delete (and the CR's deletion is not held).
fn refs_to_clean(
    entry: &Entry,
    scoped: &Resolver<'_, '_>,
    cr: &Value,
    compiled: &CompiledBox,
) -> Result<Vec<Value>, ReconcileError> {
    match child_refs(entry, scoped, cr, compiled) {
        Err(error) if error.reason == Reason::NamespaceRefused => Ok(Vec::new()),
        refs => refs,
    }
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
