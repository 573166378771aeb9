//! Leader mode: replicas compete for one Lease; its holder reconciles everything. A
//! follower looks again every renew period, so a Lease released at shutdown changes hands
//! within that period, and one whose holder died within its duration; in between it knocks
//! on the holder's Live API ([`super::peer`]), so a holder killed outright is replaced as
//! soon as its port is found closed.

use std::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use orkestra_kube::objects::Objects;
use serde_json::json;
use tokio::sync::watch;

use super::leases::{self, Observed};
use super::{Ownership, Settings, View, peer};

enum Role {
    Leading,
    /// Another holds it (named, with its Lease as read) or someone took it first.
    Following(Option<String>, Option<Box<Lease>>),
}

pub async fn run(api: Objects<Lease>, settings: Settings, ownership: Ownership, mut stop: watch::Receiver<bool>) {
    let name = settings.leader_lease();
    let mut observed = Observed::default();
    let mut renewed: Option<Instant> = None;
    let mut holder: Option<String> = None;
    let mut knocks = peer::Knocks::default();
    loop {
        let started = Instant::now();
        let mut watched = None;
        match step(&api, &name, &settings, &mut observed).await {
            Ok(Role::Leading) => {
                renewed = Some(started);
                holder = Some(settings.identity.clone());
            }
            Ok(Role::Following(other, lease)) => {
                renewed = None;
                holder = other;
                watched = lease;
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
        // Following a holder that named its address: knock on it until the next look.
        let peers: Vec<(Box<Lease>, std::net::SocketAddr)> = watched
            .and_then(|lease| peer::address(&lease).map(|addr| (lease, addr)))
            .into_iter()
            .collect();
        tokio::select! {
            gone = peer::first_gone(&mut knocks, &peers, settings.renew) => {
                if let Some(lease) = gone {
                    tracing::info!(lease = %name, holder = ?holder, "the leader's process is gone; taking over without waiting for its Lease");
                    observed.mark_gone(&lease);
                }
            }
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
        return Ok(Role::Following(current, Some(Box::new(lease))));
    }
    leases::hold(&mut lease, me, settings.duration);
    peer::announce(&mut lease, settings.advertise);
    Ok(match leases::write(api, lease).await? {
        true => Role::Leading,
        false => Role::Following(None, None),
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
        peer::announce(&mut lease, None);
        leases::write(api, lease).await.map(|_| ())
    }
    .await;
    match result {
        Ok(()) => tracing::info!(lease = %name, "leader Lease released"),
        Err(error) => tracing::warn!(lease = %name, %error, "cannot release the leader Lease; it will expire"),
    }
}
