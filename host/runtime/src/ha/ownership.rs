//! Which CRs this replica may reconcile now, and the reconciles it has in flight.
//!
//! The Kordinator asks [`Ownership::claim`] before each item and holds the answer while the
//! item runs; leader election and shard membership change the [`View`]. In shard mode a
//! replica owns a key when every ring it acts on gives it the key and no other live member's
//! published ring gives that member the key: a replica drops keys (and waits for their
//! reconciles to finish) before it publishes a ring without them, and reads the others'
//! rings only after publishing its own, so two replicas never hold one key at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use super::ring::Ring;

/// How the replicas of one Katalog share its CRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One replica reconciles everything.
    #[default]
    None,
    /// One elected replica reconciles everything; the others keep warm caches.
    Leader,
    /// Every live replica reconciles its share.
    Shard,
}

/// Which keys this replica owns.
#[derive(Debug, Clone, PartialEq)]
pub enum View {
    All,
    Nothing,
    Shards(Shards),
}

/// A shard member's view: the rings it acts on (two while it hands keys over) and the rings
/// the other live members published.
#[derive(Debug, Clone, PartialEq)]
pub struct Shards {
    pub me: String,
    pub acting: Vec<Ring>,
    pub others: Vec<(String, Ring)>,
}

impl Shards {
    fn owns(&self, id: &str) -> bool {
        !self.acting.is_empty()
            && self.acting.iter().all(|ring| ring.owner(id) == Some(&self.me))
            && self
                .others
                .iter()
                .all(|(member, ring)| ring.owner(id) != Some(member.as_str()))
    }
}

/// Shared by the Kordinators, the lease tasks and the Live API.
#[derive(Clone)]
pub struct Ownership(Arc<Shared>);

struct Shared {
    mode: Mode,
    identity: String,
    view: RwLock<View>,
    /// Reconciles running now, by `crd/key`.
    in_flight: Mutex<HashMap<String, usize>>,
    finished: Notify,
    /// Bumped when the view changes, so newly owned CRs are offered again.
    changes: watch::Sender<u64>,
    /// What the Live API shows of the election or membership.
    status: Mutex<Value>,
    /// Shard mode: the canary counts this member publishes on its Lease, and those the
    /// other live members published, by member (opaque text here; see `canary_counts`).
    counts: Mutex<Option<String>>,
    heard: Mutex<Vec<(String, String)>>,
}

impl Default for Ownership {
    fn default() -> Self {
        Self::new(Mode::None, String::new())
    }
}

impl Ownership {
    /// Everything is owned in [`Mode::None`]; nothing until a lease says so otherwise.
    pub fn new(mode: Mode, identity: String) -> Self {
        let view = match mode {
            Mode::None => View::All,
            Mode::Leader | Mode::Shard => View::Nothing,
        };
        Self(Arc::new(Shared {
            mode,
            identity,
            view: RwLock::new(view),
            in_flight: Mutex::default(),
            finished: Notify::new(),
            changes: watch::channel(0).0,
            status: Mutex::new(Value::Null),
            counts: Mutex::default(),
            heard: Mutex::default(),
        }))
    }

    pub fn mode(&self) -> Mode {
        self.0.mode
    }

    pub fn identity(&self) -> &str {
        &self.0.identity
    }

    /// Whether this replica reconciles now (upstream's `isKonductor`): always without HA,
    /// when elected in leader mode, when it holds a share in shard mode.
    pub fn is_konductor(&self) -> bool {
        !matches!(*self.read(), View::Nothing)
    }

    /// Whether this replica decides the components' rollouts (and so keeps them): one
    /// replica at a time whatever the mode — the one without HA, the leader, and in shard
    /// mode the member whose share holds the rollouts' own id, so that what one member
    /// decides (a rollback) is never written over by another's view.
    pub fn decides_rollouts(&self) -> bool {
        self.owns_id(ROLLOUTS)
    }

    pub fn owns(&self, crd: &str, key: &str) -> bool {
        self.owns_id(&id(crd, key))
    }

    fn owns_id(&self, id: &str) -> bool {
        match &*self.read() {
            View::All => true,
            View::Nothing => false,
            View::Shards(shards) => shards.owns(id),
        }
    }

    /// A reconcile of `key` may start: `None` when another replica owns it. The key counts as
    /// in flight until the claim drops.
    pub fn claim(&self, crd: &str, key: &str) -> Option<Claim> {
        // One replica owns everything and hands nothing over: nothing to track.
        if self.0.mode == Mode::None {
            return Some(Claim(None));
        }
        let id = id(crd, key);
        let mut in_flight = self.0.in_flight.lock();
        if !self.owns_id(&id) {
            return None;
        }
        *in_flight.entry(id.clone()).or_default() += 1;
        Some(Claim(Some((self.clone(), id))))
    }

    /// How many of `keys` (of `crd`) this replica owns.
    pub fn count_owned<'k>(&self, crd: &str, keys: impl IntoIterator<Item = &'k String>) -> usize {
        match &*self.read() {
            View::All => keys.into_iter().count(),
            View::Nothing => 0,
            View::Shards(shards) => keys.into_iter().filter(|key| shards.owns(&id(crd, key))).count(),
        }
    }

    /// Replaces the view; returns whether it changed.
    pub fn set(&self, view: View) -> bool {
        let mut current = self.0.view.write();
        if *current == view {
            return false;
        }
        *current = view;
        drop(current);
        self.0.changes.send_modify(|n| *n += 1);
        true
    }

    /// Waits until no reconcile of a key this replica no longer owns is in flight.
    pub async fn drained(&self) {
        loop {
            let notified = self.0.finished.notified();
            let pending = {
                let in_flight = self.0.in_flight.lock();
                in_flight.keys().any(|id| !self.owns_id(id))
            };
            if !pending {
                return;
            }
            // A claim dropping wakes us; the timeout covers a view that changed meanwhile.
            let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
        }
    }

    /// How many reconciles are in flight.
    pub fn in_flight(&self) -> usize {
        let in_flight = self.0.in_flight.lock();
        in_flight.values().sum()
    }

    /// Changes of the view, for offering newly owned CRs again.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.0.changes.subscribe()
    }

    /// Sets what this member's Lease carries as its canary counts from its next renewal.
    pub fn publish_counts(&self, counts: Option<String>) {
        *self.0.counts.lock() = counts;
    }

    pub(super) fn counts(&self) -> Option<String> {
        self.0.counts.lock().clone()
    }

    /// Takes the canary counts the other live members published, as last read.
    pub(super) fn hear_counts(&self, heard: Vec<(String, String)>) {
        *self.0.heard.lock() = heard;
    }

    /// The other live members' canary counts, by member.
    pub fn counts_heard(&self) -> Vec<(String, String)> {
        self.0.heard.lock().clone()
    }

    pub fn set_status(&self, status: Value) {
        *self.0.status.lock() = status;
    }

    /// The Live API's `ha` block.
    pub fn report(&self) -> Value {
        let mut report = json!({
            "mode": self.0.mode,
            "isKonductor": self.is_konductor(),
            "inFlight": self.in_flight(),
        });
        if self.0.mode != Mode::None {
            report["identity"] = json!(self.0.identity);
            report["decidesRollouts"] = json!(self.decides_rollouts());
        }
        if let (Some(report), Value::Object(status)) = (report.as_object_mut(), self.0.status.lock().clone()) {
            report.extend(status);
        }
        report
    }

    fn read(&self) -> parking_lot::RwLockReadGuard<'_, View> {
        self.0.view.read()
    }
}

/// The rollouts' place on the ring: no CRD's key (a CRD name has no space).
const ROLLOUTS: &str = "orkestra rollouts";

fn id(crd: &str, key: &str) -> String {
    format!("{crd}/{key}")
}

/// The member of a settled `ring` that reconciles the CR `key` of `crd`.
pub fn owner_in<'r>(ring: &'r Ring, crd: &str, key: &str) -> Option<&'r str> {
    ring.owner(&id(crd, key))
}

/// The member of a settled `ring` that decides the components' rollouts.
pub fn rollouts_decider(ring: &Ring) -> Option<&str> {
    ring.owner(ROLLOUTS)
}

/// A reconcile in flight; dropping it lets a hand-over proceed. Untracked without HA.
pub struct Claim(Option<(Ownership, String)>);

impl Drop for Claim {
    fn drop(&mut self) {
        let Some((ownership, id)) = &self.0 else { return };
        let mut in_flight = ownership.0.in_flight.lock();
        if let Some(count) = in_flight.get_mut(id) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(id);
            }
        }
        drop(in_flight);
        ownership.0.finished.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(members: &[&str]) -> Ring {
        Ring::new(members.iter().map(|m| m.to_string()))
    }

    fn member(me: &str, acting: Vec<Ring>, others: Vec<(&str, Ring)>) -> Ownership {
        let ownership = Ownership::new(Mode::Shard, me.into());
        ownership.set(View::Shards(Shards {
            me: me.into(),
            acting,
            others: others.into_iter().map(|(m, r)| (m.to_string(), r)).collect(),
        }));
        ownership
    }

    #[test]
    fn no_key_is_owned_twice_while_a_member_joins() {
        let old = ring(&["a", "b"]);
        let new = ring(&["a", "b", "c"]);
        // c has published the new ring; a is handing over; b has not noticed c yet.
        let a = member(
            "a",
            vec![old.clone(), new.clone()],
            vec![("b", old.clone()), ("c", new.clone())],
        );
        let b = member("b", vec![old.clone()], vec![("a", old.clone())]);
        let c = member("c", vec![new.clone()], vec![("a", old.clone()), ("b", old.clone())]);
        for i in 0..1000 {
            let key = format!("ns/cr-{i}");
            let owners = [&a, &b, &c].iter().filter(|o| o.owns("sites", &key)).count();
            assert!(owners <= 1, "{key} owned by {owners} members");
        }
        // c takes nothing while both others still claim under the old ring.
        assert!((0..1000).all(|i| !c.owns("sites", &format!("ns/cr-{i}"))));
        // Once every member published the new ring, every key has exactly one owner.
        let settled: Vec<Ownership> = ["a", "b", "c"]
            .iter()
            .map(|me| {
                let others = ["a", "b", "c"]
                    .into_iter()
                    .filter(|m| m != me)
                    .map(|m| (m, new.clone()))
                    .collect();
                member(me, vec![new.clone()], others)
            })
            .collect();
        for i in 0..1000 {
            let key = format!("ns/cr-{i}");
            assert_eq!(settled.iter().filter(|o| o.owns("sites", &key)).count(), 1, "{key}");
        }
    }

    #[test]
    fn one_replica_decides_rollouts_in_every_mode() {
        let settled = |ring: &Ring, members: &[&str]| -> Vec<Ownership> {
            members
                .iter()
                .map(|me| {
                    let others = members
                        .iter()
                        .filter(|m| *m != me)
                        .map(|m| (*m, ring.clone()))
                        .collect();
                    member(me, vec![ring.clone()], others)
                })
                .collect()
        };
        for members in [&["a", "b"][..], &["a", "b", "c"], &["m1", "m2", "m3", "m4", "m5"]] {
            let shards = settled(&ring(members), members);
            let deciders = shards.iter().filter(|o| o.decides_rollouts()).count();
            assert_eq!(deciders, 1, "{members:?}");
            let ring = ring(members);
            for (me, shard) in members.iter().zip(&shards) {
                assert_eq!(shard.decides_rollouts(), rollouts_decider(&ring) == Some(*me));
                assert_eq!(
                    shard.owns("sites", "ns/a"),
                    owner_in(&ring, "sites", "ns/a") == Some(*me)
                );
            }
            // Reconciling a share is not deciding: the others reconcile and follow.
            assert!(shards.iter().all(Ownership::is_konductor));
        }
        let leader = Ownership::new(Mode::Leader, "me".into());
        assert!(!leader.decides_rollouts(), "a standby follows");
        leader.set(View::All);
        assert!(leader.decides_rollouts());
    }

    #[test]
    fn a_claim_is_refused_for_keys_not_owned_and_counted_until_dropped() {
        let leader = Ownership::new(Mode::Leader, "me".into());
        assert!(leader.claim("sites", "ns/a").is_none());
        assert!(!leader.is_konductor());
        assert!(leader.set(View::All));
        assert!(!leader.set(View::All), "an unchanged view is not a change");
        let claim = leader.claim("sites", "ns/a").expect("the leader owns every key");
        assert_eq!(leader.in_flight(), 1);
        drop(claim);
        assert_eq!(leader.in_flight(), 0);
        let alone = Ownership::default();
        assert!(alone.is_konductor());
        let _untracked = alone.claim("sites", "ns/a").expect("without HA every key is owned");
        assert_eq!(alone.in_flight(), 0, "nothing to hand over, nothing tracked");
    }

    #[tokio::test]
    async fn drained_waits_for_reconciles_of_keys_given_up() {
        let ownership = Ownership::new(Mode::Leader, "me".into());
        ownership.set(View::All);
        let claim = ownership.claim("sites", "ns/a").unwrap();
        ownership.set(View::Nothing);
        let waiter = tokio::spawn({
            let ownership = ownership.clone();
            async move { ownership.drained().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the reconcile of ns/a is still running");
        drop(claim);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("drained returns once the claim drops")
            .unwrap();
    }
}
