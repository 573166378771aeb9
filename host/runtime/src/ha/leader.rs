//! Leader mode: replicas compete for one Lease; its holder reconciles everything. A
//! follower looks again every renew period, so a Lease released at shutdown changes hands
//! within that period, and one whose holder died within its duration.

use std::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use orkestra_kube::objects::Objects;
use serde_json::json;
use tokio::sync::watch;

use super::leases::{self, Observed};
use super::{Ownership, Settings, View};

enum Role {
    Leading,
    Following(Option<String>),
}

pub async fn run(api: Objects<Lease>, settings: Settings, ownership: Ownership, mut stop: watch::Receiver<bool>) {
    let name = settings.leader_lease();
    let mut observed = Observed::default();
    let mut renewed: Option<Instant> = None;
    let mut holder: Option<String> = None;
    loop {
        let started = Instant::now();
        match step(&api, &name, &settings, &mut observed).await {
            Ok(Role::Leading) => {
                renewed = Some(started);
                holder = Some(settings.identity.clone());
            }
            Ok(Role::Following(other)) => {
                renewed = None;
                holder = other;
            }
            Err(error) => tracing::warn!(lease = %name, %error, "cannot renew or read the leader Lease"),
        }
        let leading = renewed.is_some_and(|at| at.elapsed() < settings.fence());
        if ownership.set(if leading { View::All } else { View::Nothing }) {
            tracing::info!(lease = %name, identity = %settings.identity, leading, "leadership changed");
        }
        ownership.set_status(json!({
            "lease": format!("{}/{name}", settings.namespace),
            "leader": holder,
        }));
        tokio::select! {
            () = tokio::time::sleep(settings.renew) => {}
            _ = stop.changed() => break,
        }
    }
    ownership.set(View::Nothing);
    ownership.drained().await;
    if renewed.is_some() {
        release(&api, &name, &settings.identity).await;
    }
}

async fn step(api: &Objects<Lease>, name: &str, settings: &Settings, observed: &mut Observed) -> kube::Result<Role> {
    let me = settings.identity.as_str();
    let mut lease = match api.get_opt(name).await? {
        Some(lease) => lease,
        None => leases::new_lease(name, me, settings.duration),
    };
    let current = leases::holder(&lease).map(str::to_string);
    let free = match current.as_deref() {
        None => true,
        Some(holder) if holder == me => true,
        Some(_) => observed.expired(&lease, settings.duration),
    };
    if !free {
        return Ok(Role::Following(current));
    }
    leases::hold(&mut lease, me, settings.duration);
    Ok(match leases::write(api, lease).await? {
        true => Role::Leading,
        false => Role::Following(None),
    })
}

/// Empties the holder so a follower takes the Lease at its next look.
async fn release(api: &Objects<Lease>, name: &str, me: &str) {
    let result = async {
        let Some(mut lease) = api.get_opt(name).await? else {
            return Ok(());
        };
        if leases::holder(&lease) != Some(me) {
            return Ok(());
        }
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
        }
        leases::write(api, lease).await.map(|_| ())
    }
    .await;
    match result {
        Ok(()) => tracing::info!(lease = %name, "leader Lease released"),
        Err(error) => tracing::warn!(lease = %name, %error, "cannot release the leader Lease; it will expire"),
    }
}
