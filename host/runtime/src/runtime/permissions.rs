//! Whether the runtime may do what its Katalog needs, asked of the API server before the
//! first reconcile, after each reload and every few minutes (RBAC changes on its own): one
//! SelfSubjectAccessReview per permission `ork manifests` would grant, a few at a time.
//! Each missing one is said once in the log with the rule to add, and kept for the Live
//! API, `/metrics` and the reconciles, which put a `PermissionMissing` condition and Event
//! on the CRs of the CRD that lacks it. The runtime still starts: what it may do runs, and
//! what it may not fails as the API server refuses it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::PostParams;
use orkestra_katalog::compile::Compiled;
use orkestra_katalog::rbac::{Need, Needs};

use super::Runtime;
use crate::outcome::permissions::{Permissions, RUNTIME};

/// How often the permissions are asked again while nothing reloads.
pub const RECHECK: Duration = Duration::from_secs(300);

/// Reviews in flight at once: a Katalog needs tens of permissions, answered in milliseconds.
const AT_ONCE: usize = 8;

/// Each CRD's needs (and the runtime's own, under [`RUNTIME`]) that the API server says
/// the runtime's identity lacks.
pub async fn missing(
    client: &kube::Client,
    compiled: &Compiled,
    own: &Needs,
) -> Result<BTreeMap<String, Vec<Need>>, kube::Error> {
    let mut wanted: Vec<(String, Vec<Need>)> = compiled
        .enabled()
        .map(|crd| (crd.name.to_string(), Needs::of_crd(compiled, crd).each()))
        .collect();
    wanted.push((RUNTIME.to_string(), own.each()));
    // A permission several CRDs need is asked once.
    let distinct: BTreeSet<Need> = wanted.iter().flat_map(|(_, needs)| needs).cloned().collect();
    let answers: Vec<(Need, Result<bool, kube::Error>)> = futures::stream::iter(distinct)
        .map(|need| {
            let client = client.clone();
            async move {
                let answer = allowed(&client, &need).await;
                (need, answer)
            }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let mut denied = BTreeSet::new();
    for (need, answer) in answers {
        if !answer? {
            denied.insert(need);
        }
    }
    Ok(wanted
        .into_iter()
        .map(|(crd, needs)| {
            (
                crd,
                needs.into_iter().filter(|n| denied.contains(n)).collect::<Vec<_>>(),
            )
        })
        .filter(|(_, needs)| !needs.is_empty())
        .collect())
}

/// Whether the runtime's identity may do `need`.
async fn allowed(client: &kube::Client, need: &Need) -> Result<bool, kube::Error> {
    let (resource, subresource) = match need.resource.split_once('/') {
        Some((resource, sub)) => (resource.to_string(), Some(sub.to_string())),
        None => (need.resource.clone(), None),
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(need.group.clone()),
                resource: Some(resource),
                subresource,
                verb: Some(need.verb.to_string()),
                namespace: need.namespace().map(str::to_string),
                name: need.name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviews = orkestra_kube::objects::all::<SelfSubjectAccessReview>(client.clone());
    let answered = reviews.create(&PostParams::default(), &review).await?;
    Ok(answered.status.is_some_and(|s| s.allowed))
}

/// Checks once and keeps the answer in `permissions`, saying what changed in the log.
pub async fn check(client: &kube::Client, compiled: &Compiled, own: &Needs, permissions: &Permissions) {
    match missing(client, compiled, own).await {
        Ok(found) => {
            let (new, granted) = permissions.found(found);
            for (crd, need) in new {
                let crd = if crd == RUNTIME { "(runtime)" } else { crd.as_str() };
                tracing::warn!(%crd, missing = %need, rule = %need.rbac_line(), "the runtime lacks a permission its Katalog needs; add the rule to its RBAC (ork manifests prints it)");
            }
            for (crd, need) in granted {
                tracing::info!(%crd, granted = %need, "a permission the runtime lacked is granted now");
            }
        }
        Err(error) => {
            tracing::warn!(%error, "cannot check the runtime's permissions (SelfSubjectAccessReview)");
            permissions.unanswered(error.to_string());
        }
    }
}

impl Runtime {
    /// Asks the API server, before anything reconciles, whether the runtime may do what the
    /// Katalog needs and what `own` adds (`ork manifests`' runtime rules: Leases, the
    /// gateway, the rollout state); again after each reload and every [`RECHECK`].
    pub fn with_permission_check(mut self, own: Needs) -> Self {
        self.permission_needs = Some(own);
        self
    }

    /// A task that checks at once, then every [`RECHECK`]. The CRDs start beside the first
    /// check (their lists take longer than its reviews), and their workers wait for it.
    pub(super) fn check_permissions(&self) -> Option<tokio::task::JoinHandle<()>> {
        let own = self.permission_needs.clone()?;
        let (client, permissions) = (self.client.clone(), self.permissions.clone());
        permissions.expect_check();
        let roster = self.roster.clone();
        Some(tokio::spawn(async move {
            let mut every = tokio::time::interval(RECHECK);
            loop {
                every.tick().await;
                let katalog = roster.katalog();
                check(&client, &katalog, &own, &permissions).await;
            }
        }))
    }

    /// The check after a reload, on the Katalog it applied.
    pub(super) async fn recheck_permissions(&self) {
        if let Some(own) = &self.permission_needs {
            check(&self.client, &self.roster.katalog(), own, &self.permissions).await;
        }
    }
}

/// Offers every CR of `crd` again when a check finds its permissions changed: a CR that
/// failed for want of one retries as soon as it is granted, not at the end of its backoff,
/// and one that may no longer do its work says so at once.
pub(super) async fn offer_on_change(
    permissions: std::sync::Arc<Permissions>,
    crd: std::sync::Arc<str>,
    cache: crate::pipeline::observe::Cache,
    offer: std::sync::Arc<dyn crate::pipeline::observe::Enqueue>,
) {
    let mut changes = permissions.changes();
    let mut last = permissions.missing(&crd);
    while changes.changed().await.is_ok() {
        let now = permissions.missing(&crd);
        if now == last {
            continue;
        }
        last = now;
        offer.offer_all(&cache);
    }
}
