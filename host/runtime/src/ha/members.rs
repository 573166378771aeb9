//! Shard mode: each replica keeps a member Lease naming the ring of live members it acts
//! on; every CR belongs to one member of the ring (see `ring`). A change of membership is
//! handed over in steps: a member first stops taking the keys it gives away and waits for
//! their reconciles, then publishes the new ring, then reads the others' rings again. It
//! takes a key only when no other live member's published ring still gives that member the
//! key (see `ownership`). Between looks a member knocks on the others' Live APIs
//! ([`super::peer`]): a member killed outright is left out of the ring as soon as its port
//! is found closed. A member's Lease also carries what it counted on the components'
//! canaries, for the member that decides rollouts (see `runtime::canary_counts`).

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use orkestra_kube::objects::Objects;
use serde_json::json;
use tokio::sync::watch;

use super::leases::{self, Observed};
use super::ownership::Shards;
use super::ring::Ring;
use super::{COUNTS_ANNOTATION, GROUP_LABEL, Ownership, RING_ANNOTATION, Settings, View, peer};

/// How soon a member looks again while the others have not published its ring yet.
const UNSETTLED: Duration = Duration::from_millis(250);

/// A member Lease unrenewed this many durations is deleted (a replica that died).
const FORGOTTEN_AFTER: u32 = 6;

struct Member {
    api: Objects<Lease>,
    settings: Settings,
    ownership: Ownership,
    observed: Observed,
    /// The ring this member's Lease names.
    published: Option<Ring>,
    renewed: Option<Instant>,
    /// The other live members' Leases that name their address, as last read.
    peers: Vec<(Box<Lease>, std::net::SocketAddr)>,
}

pub async fn run(api: Objects<Lease>, settings: Settings, ownership: Ownership, mut stop: watch::Receiver<bool>) {
    let mut member = Member {
        api,
        settings,
        ownership,
        observed: Observed::default(),
        published: None,
        renewed: None,
        peers: Vec::new(),
    };
    let mut knocks = peer::Knocks::default();
    loop {
        let settled = tokio::select! {
            result = member.step() => match result {
                Ok(settled) => settled,
                Err(error) => {
                    tracing::warn!(lease = %member.settings.member_lease(), %error, "cannot renew or read the member Leases");
                    false
                }
            },
            _ = stop.changed() => break,
        };
        if member.renewed.is_none_or(|at| at.elapsed() >= member.settings.fence())
            && member.ownership.set(View::Nothing)
        {
            tracing::warn!(identity = %member.settings.identity, "member Lease not renewed in time: reconciling nothing until it is");
        }
        let wait = if settled { member.settings.renew } else { UNSETTLED };
        tokio::select! {
            gone = peer::first_gone(&mut knocks, &member.peers, wait) => {
                if let Some(lease) = gone {
                    tracing::info!(lease = ?lease.metadata.name, "a member's process is gone; leaving it out without waiting for its Lease");
                    member.observed.mark_gone(&lease);
                }
            }
            _ = stop.changed() => break,
        }
    }
    member.leave().await;
}

impl Member {
    /// One look at the membership; whether every live member acts on this member's ring.
    async fn step(&mut self) -> kube::Result<bool> {
        let others = self.others().await?;
        let desired = Ring::new(
            others
                .iter()
                .map(|(m, _)| m.clone())
                .chain([self.settings.identity.clone()]),
        );
        let me = self.settings.identity.clone();
        if self.published.as_ref() != Some(&desired) {
            // Hand over first: keys the new ring gives away stop here before it is published.
            let acting = self.published.iter().cloned().chain([desired.clone()]).collect();
            self.ownership.set(View::Shards(Shards {
                me: me.clone(),
                acting,
                others: others.clone(),
            }));
            if tokio::time::timeout(self.settings.renew, self.ownership.drained())
                .await
                .is_err()
            {
                // A long reconcile: keep the old ring alive and try again.
                if let Some(old) = self.published.clone() {
                    self.publish(&old).await?;
                }
                return Ok(false);
            }
            self.publish(&desired).await?;
            tracing::info!(identity = %me, members = %desired.encode(), "shard ring published");
            // Only rings read after publishing ours may decide what we take.
            let others = self.others().await?;
            return Ok(self.act(desired, others));
        }
        self.publish(&desired).await?;
        Ok(self.act(desired, others))
    }

    fn act(&mut self, ring: Ring, others: Vec<(String, Ring)>) -> bool {
        let settled = others.iter().all(|(_, theirs)| *theirs == ring) && others.len() + 1 == ring.members().len();
        self.ownership.set_status(json!({
            "lease": format!("{}/{}", self.settings.namespace, self.settings.member_lease()),
            "members": ring.members(),
            "settled": settled,
        }));
        self.ownership.set(View::Shards(Shards {
            me: self.settings.identity.clone(),
            acting: vec![ring],
            others,
        }));
        settled
    }

    /// The other live members and the rings they published (a quorum read).
    async fn others(&mut self) -> kube::Result<Vec<(String, Ring)>> {
        let selector = format!("{GROUP_LABEL}={}", self.settings.group_name());
        let leases = self.api.list(&ListParams::default().labels(&selector)).await?;
        let own = self.settings.member_lease();
        let mut others = Vec::new();
        let mut counts = Vec::new();
        self.peers.clear();
        for lease in leases.items {
            let name = lease.metadata.name.clone().unwrap_or_default();
            let Some(holder) = leases::holder(&lease).map(str::to_string) else {
                continue;
            };
            if name == own || holder == self.settings.identity {
                continue;
            }
            if self.observed.expired(&lease, self.settings.duration) {
                if self
                    .observed
                    .age(&name)
                    .is_some_and(|age| age > self.settings.duration * FORGOTTEN_AFTER)
                {
                    let _ = self.api.delete(&name, &DeleteParams::default()).await;
                    self.observed.forget(&name);
                }
                continue;
            }
            let annotations = lease.metadata.annotations.as_ref();
            let ring = annotations
                .and_then(|a| a.get(RING_ANNOTATION))
                .map(|text| Ring::parse(text))
                .unwrap_or_default();
            if let Some(text) = annotations.and_then(|a| a.get(COUNTS_ANNOTATION)) {
                counts.push((holder.clone(), text.clone()));
            }
            if let Some(addr) = peer::address(&lease) {
                self.peers.push((Box::new(lease), addr));
            }
            others.push((holder, ring));
        }
        others.sort_by(|a, b| a.0.cmp(&b.0));
        self.ownership.hear_counts(counts);
        Ok(others)
    }

    /// Renews this member's Lease naming `ring` (server-side apply: the Lease is its own).
    async fn publish(&mut self, ring: &Ring) -> kube::Result<()> {
        let started = Instant::now();
        let name = self.settings.member_lease();
        let mut annotations = json!({RING_ANNOTATION: ring.encode()});
        if let Some(addr) = self.settings.advertise {
            annotations[peer::ANNOTATION] = json!(addr.to_string());
        }
        if let Some(counts) = self.ownership.counts() {
            annotations[COUNTS_ANNOTATION] = json!(counts);
        }
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "labels": {GROUP_LABEL: self.settings.group_name()},
                "annotations": annotations,
            },
            "spec": {
                "holderIdentity": self.settings.identity,
                "leaseDurationSeconds": leases::seconds(self.settings.duration),
                "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now()),
            },
        });
        self.api
            .patch(&name, &PatchParams::apply("orkestra").force(), &Patch::Apply(&lease))
            .await?;
        self.published = Some(ring.clone());
        self.renewed = Some(started);
        Ok(())
    }

    /// Gives every key up, waits for their reconciles, and deletes the member Lease so the
    /// others take over at their next look.
    async fn leave(self) {
        self.ownership.set(View::Nothing);
        self.ownership.drained().await;
        let name = self.settings.member_lease();
        match self.api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(lease = %name, "member Lease released"),
            Err(error) => tracing::warn!(lease = %name, %error, "cannot delete the member Lease; it will expire"),
        }
    }
}
