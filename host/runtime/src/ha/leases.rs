//! The Lease objects both modes keep: reading, writing with a precondition, and deciding
//! when another holder's Lease has expired.
//!
//! Expiry is judged by this replica's clock, from when it last saw the Lease change (as
//! client-go's leader election does), never from the holder's `renewTime`: the replicas'
//! clocks need not agree.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use orkestra_kube::objects::Objects;

/// Creates `lease`, or replaces it when its `resourceVersion` is still current: `false`
/// when someone else wrote it first (409).
pub async fn write(api: &Objects<Lease>, lease: Lease) -> kube::Result<bool> {
    let name = lease.metadata.name.clone().unwrap_or_default();
    let result = match lease.metadata.resource_version {
        Some(_) => api.replace(&name, &PostParams::default(), &lease).await,
        None => api.create(&PostParams::default(), &lease).await,
    };
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}

/// A new Lease `name` held by `identity`.
pub fn new_lease(name: &str, identity: &str, duration: Duration) -> Lease {
    let mut lease = Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec::default()),
    };
    hold(&mut lease, identity, duration);
    lease
}

/// Marks `lease` held by `identity` as of now (a new holder also gets an acquire time and a
/// transition).
pub fn hold(lease: &mut Lease, identity: &str, duration: Duration) {
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let now = MicroTime(jiff::Timestamp::now());
    if spec.holder_identity.as_deref() != Some(identity) {
        spec.acquire_time = Some(now.clone());
        if spec.holder_identity.as_deref().is_some_and(|h| !h.is_empty()) {
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
    }
    spec.holder_identity = Some(identity.to_string());
    spec.lease_duration_seconds = Some(seconds(duration));
    spec.renew_time = Some(now);
}

/// A Lease's `leaseDurationSeconds` for `duration` (at least 1).
pub fn seconds(duration: Duration) -> i32 {
    duration.as_secs().max(1).try_into().unwrap_or(i32::MAX)
}

pub fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// When this replica last saw each Lease change, and the renewals whose holder it found
/// gone (see [`super::peer`]).
#[derive(Default)]
pub struct Observed {
    seen: HashMap<String, (String, Instant)>,
    gone: HashMap<String, String>,
}

/// Who renewed `lease` last, and when (by its own clock: only compared for equality).
fn renewal(lease: &Lease) -> String {
    let spec = lease.spec.as_ref();
    format!(
        "{}@{}",
        spec.and_then(|s| s.holder_identity.as_deref()).unwrap_or(""),
        spec.and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.to_string())
            .unwrap_or_default()
    )
}

impl Observed {
    /// The holder of `lease` as last renewed is gone (its process answers no more): the
    /// Lease counts as expired until someone renews it again.
    pub fn mark_gone(&mut self, lease: &Lease) {
        let name = lease.metadata.name.clone().unwrap_or_default();
        self.gone.insert(name, renewal(lease));
    }

    /// Whether `lease` has gone unrenewed for its duration (`fallback` when it states none),
    /// counted from when this replica first saw its current renewal, or its holder was
    /// found gone since that renewal.
    pub fn expired(&mut self, lease: &Lease, fallback: Duration) -> bool {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let spec = lease.spec.as_ref();
        let renewal = renewal(lease);
        if self.gone.get(&name) == Some(&renewal) {
            return true;
        }
        let duration = spec
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map_or(fallback, Duration::from_secs);
        let now = Instant::now();
        let seen = self.seen.entry(name).or_insert_with(|| (renewal.clone(), now));
        if seen.0 != renewal {
            *seen = (renewal, now);
        }
        now.duration_since(seen.1) > duration
    }

    /// How long ago this replica saw `name`'s current renewal, if it has seen it.
    pub fn age(&self, name: &str) -> Option<Duration> {
        self.seen.get(name).map(|(_, at)| at.elapsed())
    }

    pub fn forget(&mut self, name: &str) {
        self.seen.remove(name);
        self.gone.remove(name);
    }
}
