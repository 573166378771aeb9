//! The templates of a block made children: each entry rendered (once per `forEach` element,
//! once per namespace it goes to), applied or found as it should be, labelled with its
//! surface; and the references of an entry's objects, to find or delete them.

use serde_json::{Map, Value, json};

use super::applied::Applied;
use super::{Declarative, apply};
use crate::outcome::failure::{Reason, ReconcileError};
use crate::pipeline::render::Render;
use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::{CompiledBox, Entry};

impl Declarative {
    /// Applies the templates: what they applied, and whether anything was written. With a
    /// `surface`, each child is labelled with it, and a child another surface made that this
    /// run did not apply is deleted (unless the surface keeps them).
    pub(super) async fn children(
        &self,
        compiled: &CompiledBox,
        object: &Value,
        context: &Map<String, Value>,
        surface: Option<(&str, bool)>,
    ) -> Result<Applied, ReconcileError> {
        let mut applied = Applied::default();
        // The UIDs of every child this run applied or found as it should be.
        let mut made: Vec<String> = Vec::new();
        let resolver = Resolver::in_context(object, &self.crd.notes, context);
        for (block, is_create) in [(&compiled.on_create, true), (&compiled.on_reconcile, false)] {
            let Some(block) = block else { continue };
            if !block.conditions.passes(&resolver, None) {
                continue;
            }
            // Names applied by a passing entry are safe from DeleteIfOwned of a failing one.
            let mut kept: Vec<(&str, String)> = Vec::new();
            let mut failing: Vec<(&Entry, Resolver<'_, '_>)> = Vec::new();
            for entry in &block.entries {
                for scoped in expand(entry, &resolver) {
                    if entry.conditions.passes(&scoped, None) {
                        let mode = apply::Mode {
                            create_only: entry.create_only(),
                            force: entry.force.unwrap_or(compiled.force_conflict),
                            owned: true,
                            replace: entry.replace,
                            manager: &self.managers.templates,
                            scaled: entry.autoscale.is_some(),
                        };
                        let placements = placements(entry, &scoped, object, compiled)?;
                        // A create-only child that exists as it should is not rendered again
                        // (unless its autoscale may step its replicas).
                        let settled = placements.is_none() && !entry.kind.api_version.is_empty() && !mode.scaled;
                        let unchanged = match settled {
                            true => {
                                self.applier
                                    .unchanged(&child_refs(entry, &scoped, object, compiled)?[0], object, mode)
                                    .await?
                            }
                            false => None,
                        };
                        let mut lives = Vec::new();
                        match unchanged {
                            Some(live) => lives.push((live, false)),
                            None => {
                                let mut rendered = entry.render(&scoped, object).map_err(|e| {
                                    ReconcileError::new(Reason::RenderFailed, format!("{}: {e}", entry.at))
                                })?;
                                self.copy_source(entry, &scoped, object, compiled, &mut rendered)
                                    .await?;
                                if let Some(scale) = &entry.autoscale {
                                    self.scale(scale, &scoped, &mut rendered, jiff::Timestamp::now());
                                }
                                if let Some((name, _)) = surface {
                                    label(&mut rendered, orkestra_expr::labels::SURFACE_LABEL, name);
                                }
                                match &placements {
                                    None => lives.push(self.applier.apply(rendered, object, mode).await?),
                                    Some(namespaces) => {
                                        for namespace in namespaces {
                                            let mut copy = rendered.clone();
                                            copy["metadata"]["namespace"] = json!(namespace);
                                            lives.push(self.applier.apply(copy, object, mode).await?);
                                        }
                                        if entry.fields.contains_key("toNamespaces") {
                                            applied.wrote |=
                                                self.applier.prune_copies(&rendered, object, namespaces).await?;
                                        }
                                    }
                                }
                            }
                        }
                        for (live, written) in lives {
                            made.extend(live["metadata"]["uid"].as_str().map(String::from));
                            kept.push((
                                entry.kind.key,
                                live["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                            ));
                            applied.wrote |= written;
                            applied.add(live);
                        }
                    } else if !is_create && !entry.create_only() {
                        // `when` decides a create-once child's creation only: a Job created
                        // while its phase held must outlive the phase it moves the CR past.
                        failing.push((entry, scoped));
                    }
                }
            }
            for (entry, scoped) in failing {
                for target in child_refs(entry, &scoped, object, compiled)? {
                    let name = target["metadata"]["name"].as_str().unwrap_or_default();
                    if kept
                        .iter()
                        .any(|(kind, kept_name)| *kind == entry.kind.key && kept_name == name)
                    {
                        continue;
                    }
                    if self.applier.delete_if_owned(&target, object).await? {
                        applied.wrote = true;
                        tracing::info!(kind = %target["kind"], %name, "condition no longer holds: deleted the child we own");
                    }
                }
            }
        }
        if let Some((name, false)) = surface {
            applied.wrote |= self.applier.prune_other_surfaces(object, name, &made).await?;
        }
        Ok(applied)
    }
}

/// Sets one label on a rendered object.
pub(super) fn label(object: &mut Value, key: &str, value: &str) {
    let Some(metadata) = object
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
    else {
        return;
    };
    if let Some(metadata) = metadata.as_object_mut() {
        let labels = metadata.entry("labels").or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(key.to_string(), json!(value));
        }
    }
}

/// Where an entry's objects go ([`Entry::placements`]); a namespace the CR may not pick fails
/// the reconcile.
pub(super) fn placements(
    entry: &Entry,
    scoped: &Resolver<'_, '_>,
    cr: &Value,
    compiled: &CompiledBox,
) -> Result<Option<Vec<String>>, ReconcileError> {
    entry
        .placements(scoped, cr["metadata"]["namespace"].as_str(), compiled)
        .map_err(|why| ReconcileError::new(Reason::NamespaceRefused, format!("{}.{why}", entry.at)))
}

/// apiVersion, kind, name and namespace of each of an entry's objects (one per namespace it
/// goes to), to find or delete them. Custom entries carry their kind in the template, so
/// only they are rendered whole.
pub(super) fn child_refs(
    entry: &Entry,
    scoped: &Resolver<'_, '_>,
    cr: &Value,
    compiled: &CompiledBox,
) -> Result<Vec<Value>, ReconcileError> {
    let failed = |e: String| ReconcileError::new(Reason::RenderFailed, format!("{}: {e}", entry.at));
    let reference = if entry.kind.api_version.is_empty() {
        let rendered = entry.render(scoped, cr).map_err(failed)?;
        json!({
            "apiVersion": rendered["apiVersion"], "kind": rendered["kind"],
            "metadata": {"name": rendered["metadata"]["name"], "namespace": rendered["metadata"]["namespace"]},
        })
    } else {
        let name = entry
            .render_name(scoped, cr["metadata"]["name"].as_str().unwrap_or_default())
            .map_err(failed)?;
        json!({
            "apiVersion": entry.kind.api_version, "kind": entry.kind.kind,
            "metadata": {"name": name, "namespace": cr["metadata"]["namespace"]},
        })
    };
    Ok(match placements(entry, scoped, cr, compiled)? {
        None => vec![reference],
        Some(namespaces) => namespaces
            .into_iter()
            .map(|namespace| {
                let mut copy = reference.clone();
                copy["metadata"]["namespace"] = json!(namespace);
                copy
            })
            .collect(),
    })
}

/// `resolver` with the reconcile's context entries (`.cross`, `.children`) added.
/// One resolver per element for a `forEach` entry (`.item` and `.<as>`), else one.
pub(super) fn expand<'o, 'n>(entry: &Entry, resolver: &Resolver<'o, 'n>) -> Vec<Resolver<'o, 'n>> {
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
