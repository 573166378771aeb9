//! Child resources in, the cluster changed only where it differs: server-side apply with the
//! field manager of the CRD (or component) that wants it, the CR's ownership stamped on it, no
//! write when every field we manage already has its value, and never a touch on an object of
//! the same name that is not provably this CR's (see [`orkestra_katalog::ownership`]).

use std::sync::Arc;

use base64::Engine;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::discovery::Scope;
use orkestra_kube::objects::Objects;
use serde_json::{Value, json};

use super::scale::SCALED_AT;
use crate::outcome::counters::Counters;
use crate::outcome::failure::{Reason, ReconcileError};
use crate::pipeline::observe::Children;
use crate::pipeline::render::GENERATED_AT;
use orkestra_expr::labels;
use orkestra_katalog::compile::Replace;
use orkestra_katalog::ownership::{self, Claim, Owner};
use orkestra_kube::discovery::KindCache;

/// How to apply one child.
#[derive(Debug, Clone, Copy)]
pub struct Mode<'a> {
    /// Leave an existing object alone.
    pub create_only: bool,
    /// Take fields over from other field managers.
    pub force: bool,
    /// Set the CR as controller owner (same-namespace children only). Off for onDelete Jobs,
    /// which must outlive the CR.
    pub owned: bool,
    /// When an existing object is deleted and created anew.
    pub replace: Replace,
    /// The field manager: the CRD's for its templates, the component's for what it returns.
    pub manager: &'a str,
    /// Its replicas follow `autoscale`: a create-only workload still takes their steps.
    pub scaled: bool,
}

/// A resourceVersion no stored object has: etcd counts revisions from 1 and every write
/// moves the count on before it stores, so what is stored is at 2 or later.
const NEVER_STORED: &str = "1";

/// What [`Applier::delete_child`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deletion {
    /// There was no such object.
    Absent,
    Deleted,
    /// It exists but is not provably the CR's; the text says why. Nothing was written.
    Refused(String),
}

/// Applies children for one CRD; remembers what discovery said about each kind.
pub struct Applier {
    client: kube::Client,
    kinds: KindCache,
    counters: Arc<Counters>,
    children: Children,
}

/// The owner `cr` describes; a CR the API server never stored cannot own anything.
fn owner_of(cr: &Value) -> Result<Owner<'_>, ReconcileError> {
    Owner::of(cr).ok_or_else(|| {
        ReconcileError::new(
            Reason::NotOwned,
            "the custom resource has no UID yet, so nothing can be proven to be its",
        )
    })
}

impl Applier {
    pub fn new(client: kube::Client, counters: Arc<Counters>) -> Self {
        Self {
            client,
            kinds: KindCache::default(),
            counters,
            children: Children::default(),
        }
    }

    /// The same applier writing through `client` (a component's own identity).
    pub fn acting_as(&self, client: kube::Client) -> Self {
        Self {
            client,
            kinds: self.kinds.clone(),
            counters: self.counters.clone(),
            children: self.children.clone(),
        }
    }

    /// Existing children are read from `children` where it holds them.
    pub fn with_children(mut self, children: Children) -> Self {
        self.children = children;
        self
    }

    /// The API for `object`'s kind, its scope and the apiVersion the server serves it as.
    async fn api(&self, object: &Value) -> Result<(Objects<DynamicObject>, Scope, String), ReconcileError> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let (resource, scope) = self
            .kinds
            .resolve(&self.client, &api_version, &kind)
            .await
            .map_err(|e| {
                ReconcileError::api(
                    Reason::UnknownKind,
                    format!("{api_version} {kind} is not served by the API server"),
                    e,
                )
            })?;
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .filter(|_| scope == Scope::Namespaced);
        let api = Objects::within(self.client.clone(), namespace, &resource)
            .map_err(|e| ReconcileError::api(Reason::ApplyFailed, format!("{kind} in that namespace"), e))?;
        Ok((api, scope, resource.api_version))
    }

    /// Applies `object` for `cr`. Returns the object as it is in the cluster afterwards and
    /// whether this call wrote it.
    pub async fn apply(&self, mut object: Value, cr: &Value, mode: Mode<'_>) -> Result<(Value, bool), ReconcileError> {
        let owner = owner_of(cr)?;
        let watched = (
            object["apiVersion"].as_str().unwrap_or_default().to_string(),
            object["kind"].as_str().unwrap_or_default().to_string(),
        );
        let (api, scope, served) = self.api(&object).await?;
        // The version the server serves (an older one on an older cluster).
        object["apiVersion"] = json!(served);
        if scope == Scope::Cluster
            && let Some(metadata) = object["metadata"].as_object_mut()
        {
            // The server drops it; keeping it would make every comparison a difference.
            metadata.remove("namespace");
        }
        let in_owner_namespace = scope == Scope::Namespaced
            && owner.namespace.is_some()
            && object["metadata"]["namespace"].as_str() == owner.namespace;
        ownership::stamp(&mut object, &owner, mode.owned && in_owner_namespace);
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let failed = |e: kube::Error| ReconcileError::api(Reason::ApplyFailed, format!("{kind} {name}"), e);
        let key = match object["metadata"]["namespace"].as_str() {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.clone(),
        };
        // Its writes are announced under this name, so their echoes re-enqueue nobody.
        let own_key = Children::own_key(&watched.0, &watched.1, &key);
        let live = match self.children.get(&watched.0, &watched.1, &key) {
            Some(seen) => Some(Value::clone(&seen)),
            // Once the watch of its kind has listed, it holds every child that is provably
            // ours, so one it does not hold most often does not exist yet: it is created at
            // once, with no read before. So is a child of a CR never reconciled (no status
            // yet) while that watch still lists, as after a restart. One that does exist
            // refuses the create and is read, to be judged as any other.
            None if self.children.holds_all(&watched.0, &watched.1) || never_reconciled(cr) => {
                match self
                    .create(&api, &name, &own_key, &object, mode)
                    .await
                    .map_err(failed)?
                {
                    Some(created) => return Ok((read_back(&created)?, true)),
                    None => self.fetch(&api, &kind, &name).await?,
                }
            }
            None => self.fetch(&api, &kind, &name).await?,
        };
        if let Some(mut live) = live {
            let legacy = match ownership::claim(&live, &owner) {
                Claim::Ours => false,
                Claim::Legacy => true,
                Claim::NotOurs(whose) => {
                    return Err(ReconcileError::new(
                        Reason::NotOwned,
                        format!("{kind} {name} already exists and {whose}; it is left untouched"),
                    ));
                }
            };
            if let Some(managers) = ownership::migrated_managers(&live, mode.manager) {
                // Fields the shared manager of older releases applied become this tenant's,
                // so a field this tenant stops applying is removed as it should be.
                let patch = json!({"metadata": {
                    "resourceVersion": live["metadata"]["resourceVersion"], "managedFields": managers,
                }});
                live = self.merge(&api, &name, &own_key, &patch, mode.manager).await?;
            }
            if legacy && mode.create_only {
                // Adopted without rewriting what it holds: only the UID and kind labels.
                tracing::info!(%kind, %name, owner = %owner.name, "adopting a child labelled by the older scheme");
                let live = self
                    .merge(&api, &name, &own_key, &ownership::adoption_patch(&owner), mode.manager)
                    .await?;
                return Ok((live, true));
            }
            let expired = expired(&live, mode.replace);
            let drifted = !expired && !contains(&live, &comparable(&object));
            if !expired && mode.create_only && mode.scaled && drifted {
                // A created-once workload is left alone, but for the replicas its autoscale
                // stepped: those alone, merged.
                let mut scaled = json!({"spec": {"replicas": object["spec"]["replicas"]}});
                if let Some(stamp) = object["metadata"]["annotations"][SCALED_AT].as_str() {
                    scaled["metadata"]["annotations"][SCALED_AT] = json!(stamp);
                }
                if !contains(&live, &scaled) {
                    let mut patch = scaled;
                    patch["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"].clone();
                    return Ok((self.merge(&api, &name, &own_key, &patch, mode.manager).await?, true));
                }
            }
            if !expired && (mode.create_only || !drifted) {
                return Ok((live, false));
            }
            if expired || mode.replace == Replace::OnDrift {
                // Delete and create anew; while the old one terminates the create conflicts,
                // which is an error the retry resolves.
                self.counters.wrote();
                api.delete(&name, &DeleteParams::background().preconditions(uid_of(&live)))
                    .await
                    .map_err(failed)?;
                tracing::info!(%kind, %name, expired, "replacing the child");
            }
        }
        self.counters.wrote();
        let applied = self.write(&api, &name, &own_key, object, mode).await.map_err(failed)?;
        Ok((read_back(&applied)?, true))
    }

    /// Server-side applies `object` as `mode` says; a rotated object is stamped with the
    /// time it was made.
    async fn write(
        &self,
        api: &Objects<DynamicObject>,
        name: &str,
        own_key: &str,
        mut object: Value,
        mode: Mode<'_>,
    ) -> Result<DynamicObject, kube::Error> {
        if matches!(mode.replace, Replace::After(_)) {
            let now = orkestra_expr::calendar::rfc3339(jiff::Timestamp::now());
            object["metadata"]["annotations"][GENERATED_AT] = json!(now);
        }
        let params = PatchParams::apply(mode.manager);
        let params = if mode.force { params.force() } else { params };
        self.children
            .own_writes()
            .write(own_key, api.patch(name, &params, &Patch::Apply(&object)))
            .await
    }

    /// Creates `object` by a server-side apply that cannot change an existing object: it
    /// carries a resourceVersion no stored object has, which the API server ignores on a
    /// create and checks, as a precondition, on an update. So the object comes out as this
    /// apply made it, under the apply's field manager, or the API server answers with a
    /// conflict and nothing is written. `None` for the conflict: an object of that name
    /// exists (someone else's, or ours that the watch has not shown yet).
    async fn create(
        &self,
        api: &Objects<DynamicObject>,
        name: &str,
        own_key: &str,
        object: &Value,
        mode: Mode<'_>,
    ) -> Result<Option<DynamicObject>, kube::Error> {
        let mut object = object.clone();
        object["metadata"]["resourceVersion"] = json!(NEVER_STORED);
        match self.write(api, name, own_key, object, mode).await {
            // Counted only when it wrote: a refused create stands where a read used to, and
            // a settled CR whose child the watch has not shown yet costs no write.
            Ok(created) => {
                self.counters.wrote();
                Ok(Some(created))
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
            // Some API servers (Services before Kubernetes 1.23) refuse any resourceVersion
            // on a create: then the object is read first, as for an existing one.
            Err(kube::Error::Api(status)) if status.message.contains("resourceVersion") => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// A merge patch of `name`, counted as a write; the object as stored afterwards.
    async fn merge(
        &self,
        api: &Objects<DynamicObject>,
        name: &str,
        own_key: &str,
        patch: &Value,
        manager: &str,
    ) -> Result<Value, ReconcileError> {
        self.counters.wrote();
        let params = PatchParams {
            field_manager: Some(manager.to_string()),
            ..PatchParams::default()
        };
        let failed = |e: kube::Error| ReconcileError::api(Reason::ApplyFailed, name, e);
        let stored = self
            .children
            .own_writes()
            .write(own_key, api.patch(name, &params, &Patch::Merge(patch)))
            .await
            .map_err(failed)?;
        read_back(&stored)
    }

    /// The live create-only object `reference` (apiVersion, kind, name, namespace) names,
    /// when the owned-kind watch holds it and [`Applier::apply`] would leave it as it is: it
    /// is provably `cr`'s, needs no migration and has not expired. Spares rendering what
    /// would not be written (a TLS key pair, random passwords). `None`: render and apply
    /// (which asks the API server for an object the watch does not hold).
    pub async fn unchanged(
        &self,
        reference: &Value,
        cr: &Value,
        mode: Mode<'_>,
    ) -> Result<Option<Value>, ReconcileError> {
        if !mode.create_only {
            return Ok(None);
        }
        let owner = owner_of(cr)?;
        // Discovery is remembered per kind: no request after the first.
        let (_, scope, _) = self.api(reference).await?;
        fn text(value: &Value) -> &str {
            value.as_str().unwrap_or_default()
        }
        let name = text(&reference["metadata"]["name"]);
        let key = match (scope, reference["metadata"]["namespace"].as_str()) {
            (Scope::Namespaced, Some(namespace)) => format!("{namespace}/{name}"),
            _ => name.to_string(),
        };
        let live = self
            .children
            .get(text(&reference["apiVersion"]), text(&reference["kind"]), &key);
        Ok(live.map(|live| Value::clone(&live)).filter(|live| {
            ownership::claim(live, &owner) == Claim::Ours
                && ownership::migrated_managers(live, mode.manager).is_none()
                && !expired(live, mode.replace)
        }))
    }

    /// The child named like `object` as the owned-kind watch last saw it.
    pub fn seen(&self, object: &Value) -> Option<std::sync::Arc<Value>> {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
        let name = text(&object["metadata"]["name"]);
        let key = match object["metadata"]["namespace"].as_str() {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name,
        };
        self.children
            .get(&text(&object["apiVersion"]), &text(&object["kind"]), &key)
    }

    /// The object named `name` as the API server has it.
    async fn fetch(
        &self,
        api: &Objects<DynamicObject>,
        kind: &str,
        name: &str,
    ) -> Result<Option<Value>, ReconcileError> {
        match api.get_opt(name).await {
            Ok(found) => found
                .map(|found| to_value(&found))
                .transpose()
                .map_err(|e| ReconcileError::new(Reason::ApplyFailed, format!("{kind} {name}: {e}"))),
            Err(e) => Err(ReconcileError::api(Reason::ApplyFailed, format!("{kind} {name}"), e)),
        }
    }

    /// Whether `object`'s kind is cluster-scoped (no owner reference can collect it).
    pub async fn is_cluster_scoped(&self, object: &Value) -> Result<bool, ReconcileError> {
        Ok(self.api(object).await?.1 == Scope::Cluster)
    }

    /// Deletes the object named like `object` if it is provably `cr`'s; true when it was
    /// (so a repeated call tells whether it is gone yet).
    pub async fn delete_if_owned(&self, object: &Value, cr: &Value) -> Result<bool, ReconcileError> {
        let deletion = self.delete_child(object, cr, DeleteParams::background()).await?;
        Ok(deletion == Deletion::Deleted)
    }

    /// The newest child of `api_version` `kind` the owned-kind watch holds for `cr` (by
    /// creation time, then name): what `.children.<kind>` shows when a run applies none. Only
    /// an object whose controller reference is the CR counts; the owner label alone is
    /// anyone's to write.
    pub fn newest_owned(&self, api_version: &str, kind: &str, cr: &Value) -> Option<Arc<Value>> {
        let uid = cr["metadata"]["uid"].as_str()?;
        let controlled = |child: &Value| {
            child["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid && r["controller"] == true))
        };
        let when = |child: &Value| {
            let metadata = &child["metadata"];
            let at = metadata["creationTimestamp"].as_str().unwrap_or_default();
            (
                at.to_string(),
                metadata["name"].as_str().unwrap_or_default().to_string(),
            )
        };
        self.children
            .owned_of_kind(api_version, kind, uid)
            .into_iter()
            .filter(|child| controlled(child))
            .max_by_key(|child| when(child))
    }

    /// Deletes `cr`'s children that another surface's templates made (their surface label is
    /// not `surface`) and this run did not apply (`made`, by UID): what a CR moved to another
    /// serve target no longer declares. Reads only the owned-kind watches' caches; a child
    /// without the label (made before it) stays.
    pub async fn prune_other_surfaces(
        &self,
        cr: &Value,
        surface: &str,
        made: &[String],
    ) -> Result<bool, ReconcileError> {
        let Some(uid) = cr["metadata"]["uid"].as_str() else {
            return Ok(false);
        };
        let mut deleted = false;
        for child in self.children.owned_by(uid) {
            let made_by = child["metadata"]["labels"][labels::SURFACE_LABEL].as_str();
            let applied_now = child["metadata"]["uid"]
                .as_str()
                .is_some_and(|uid| made.iter().any(|m| m == uid));
            if made_by.is_some_and(|made_by| made_by != surface)
                && !applied_now
                && self.delete_if_owned(&child, cr).await?
            {
                tracing::info!(kind = %child["kind"], name = %child["metadata"]["name"], from = ?made_by, to = %surface, "moved to another surface: deleted what only the previous one made");
                deleted = true;
            }
        }
        Ok(deleted)
    }

    /// Deletes the copies of `object` (same kind and name) that the owned-kind watch has seen
    /// as `cr`'s in a namespace outside `keep`: what a `toNamespaces` list no longer names.
    /// Reads only the watch's cache, so nothing is asked of the API server while none are left.
    pub async fn prune_copies(&self, object: &Value, cr: &Value, keep: &[String]) -> Result<bool, ReconcileError> {
        let Some(uid) = cr["metadata"]["uid"].as_str() else {
            return Ok(false);
        };
        let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
        let name = text(&object["metadata"]["name"]);
        let stale = self
            .children
            .owned_of_kind(&text(&object["apiVersion"]), &text(&object["kind"]), uid)
            .into_iter()
            .filter(|seen| {
                let metadata = &seen["metadata"];
                metadata["name"].as_str() == Some(name.as_str())
                    && !keep
                        .iter()
                        .any(|ns| metadata["namespace"].as_str() == Some(ns.as_str()))
            });
        let mut deleted = false;
        for copy in stale {
            deleted |= self.delete_if_owned(&copy, cr).await?;
        }
        Ok(deleted)
    }

    /// As [`Applier::delete_if_owned`], with foreground propagation: the object stays until
    /// its own dependents are gone (ordered deletion waits for that).
    pub async fn delete_if_owned_foreground(&self, object: &Value, cr: &Value) -> Result<bool, ReconcileError> {
        let deletion = self.delete_child(object, cr, DeleteParams::foreground()).await?;
        Ok(deletion == Deletion::Deleted)
    }

    /// Deletes the object named like `object` only when it is `cr`'s by its controller
    /// reference or its UID labels (a legacy name label is not enough), and only that very
    /// object (a UID precondition: not one created under the same name in between).
    pub async fn delete_child(
        &self,
        object: &Value,
        cr: &Value,
        params: DeleteParams,
    ) -> Result<Deletion, ReconcileError> {
        let owner = owner_of(cr)?;
        let (api, ..) = self.api(object).await?;
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let failed =
            |e: kube::Error| ReconcileError::api(Reason::DeleteFailed, format!("{} {name}", object["kind"]), e);
        let Some(live) = api.get_opt(name).await.map_err(failed)? else {
            return Ok(Deletion::Absent);
        };
        let live = to_value(&live).map_err(|e| ReconcileError::new(Reason::DeleteFailed, e))?;
        match ownership::claim(&live, &owner) {
            Claim::Ours => {}
            Claim::Legacy => {
                return Ok(Deletion::Refused(
                    "carries only the older name label, which does not prove whose it is".into(),
                ));
            }
            Claim::NotOurs(whose) => return Ok(Deletion::Refused(whose)),
        }
        self.counters.wrote();
        match api.delete(name, &params.preconditions(uid_of(&live))).await {
            Ok(_) => Ok(Deletion::Deleted),
            // Gone or replaced in between: not ours to delete any more.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(Deletion::Absent),
            Err(error) => Err(failed(error)),
        }
    }
}

/// Whether `cr` has no status yet: no reconcile has finished on it, so it most likely has
/// no children either.
fn never_reconciled(cr: &Value) -> bool {
    cr.get("status")
        .is_none_or(|status| status.is_null() || status.as_object().is_some_and(|s| s.is_empty()))
}

/// Whether a `rotateAfter` object is older than its maximum age (by its generated-at
/// annotation; without one it counts as expired).
fn expired(live: &Value, replace: Replace) -> bool {
    match replace {
        Replace::After(max_age) => live["metadata"]["annotations"][GENERATED_AT]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .is_none_or(|at| jiff::Timestamp::now().duration_since(at).unsigned_abs() >= max_age),
        _ => false,
    }
}

/// An object from the API server as JSON. It always serializes; should it not, the failure
/// is named rather than read as an empty object.
fn to_value(object: &DynamicObject) -> Result<Value, String> {
    serde_json::to_value(object).map_err(|e| format!("cannot read the object back: {e}"))
}

/// What an apply answered, as JSON.
fn read_back(applied: &DynamicObject) -> Result<Value, ReconcileError> {
    to_value(applied).map_err(|e| ReconcileError::new(Reason::ApplyFailed, e))
}

/// A precondition that holds only for this very object.
fn uid_of(live: &Value) -> Preconditions {
    Preconditions {
        uid: live["metadata"]["uid"].as_str().map(String::from),
        resource_version: None,
    }
}

/// The object as the API server stores what we send: Secret `stringData` lands in `data`.
fn comparable(object: &Value) -> Value {
    let mut object = object.clone();
    if object["kind"] == "Secret"
        && let Some(Value::Object(string_data)) = object.as_object_mut().and_then(|o| o.remove("stringData"))
    {
        // Over any `data` sent along (a copied Secret's), as the API server merges them.
        let mut data = match object.get("data") {
            Some(Value::Object(data)) => data.clone(),
            _ => serde_json::Map::new(),
        };
        data.extend(string_data.into_iter().map(|(k, v)| {
            (
                k,
                json!(base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or_default())),
            )
        }));
        object["data"] = Value::Object(data);
    }
    object
}

/// True when every field of `wanted` has the same value in `live` (lists element by
/// element): nothing we manage differs, so there is nothing to write.
pub fn contains(live: &Value, wanted: &Value) -> bool {
    match (live, wanted) {
        (Value::Object(live), Value::Object(wanted)) => {
            wanted.iter().all(|(k, w)| live.get(k).is_some_and(|l| contains(l, w)))
        }
        (Value::Array(live), Value::Array(wanted)) => {
            live.len() == wanted.len() && live.iter().zip(wanted).all(|(l, w)| contains(l, w))
        }
        (Value::Number(l), Value::Number(w)) => l.as_f64() == w.as_f64(),
        (live, wanted) => live == wanted,
    }
}

#[cfg(test)]
mod tests;
