//! What a slot's rollouts decided, kept across restarts and hand-overs: the version that
//! serves every CR, the canary under way (its start, share and counted reconciles), the
//! versions rolled back and why, and the last steps. The host hands each state to a
//! [`Keeper`], a port the runtime implements by writing it into the cluster, and reads it
//! back before a slot's first load ([`resume`] decides what serves then).
//!
//! A kept state never names what to fetch: the last good version is loaded by its digest
//! from this host's own store, so a state written by someone else can at most refuse a
//! version, never bring one in.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::rollout::{Refusal, Rollouts, Step, Tally};
use orkestra_katalog::component::Rollout;

/// One slot's rollout state as kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    /// The slot: `crd` or `crd/target`.
    pub slot: String,
    /// What serves every CR (the last good version while a canary runs).
    pub stable: Option<Version>,
    pub canary: Option<KeptCanary>,
    #[serde(default)]
    pub refused: Vec<Refusal>,
    #[serde(default)]
    pub history: Vec<Step>,
}

/// A version by its digest (the source is what it was loaded from, for people to read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    pub digest: String,
    pub revision: u64,
    pub source: String,
}

/// A canary under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptCanary {
    #[serde(flatten)]
    pub version: Version,
    /// When it started: its period runs from then, whatever restarts in between.
    pub started_at: jiff::Timestamp,
    /// When it is promoted unless it is rolled back first.
    pub promote_by: jiff::Timestamp,
    /// Percent of the CRs it serves, picked by the stable hash of their keys.
    pub share: u32,
    /// Its reconciles, by tenant, as last counted.
    #[serde(default)]
    pub tallies: BTreeMap<String, Tally>,
}

impl Kept {
    /// Carries its steps, refusals and revisions on in `rollouts`.
    pub fn restore_into(&self, rollouts: &mut Rollouts) {
        rollouts.history = self.history.iter().cloned().collect();
        rollouts.refusals = self.refused.iter().cloned().collect();
        rollouts.kept_revision = newest_revision(self);
    }
}

/// What serves at a slot's first load, given what was kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// The declared version, as without a kept state (its revision goes on from the kept ones).
    AsDeclared,
    /// The declared version was rolled back: the last good one serves every CR.
    Refused(Refusal),
    /// The declared version is the canary under way: it goes on serving its share.
    Canary(KeptCanary),
    /// A version declared while no runtime ran: rolled out against the last good one.
    NewVersion,
}

/// What serves when the declared version has digest `declared` and the slot declares
/// `policy`. Without a rollout declared the declared version serves every CR, as a reload
/// would make it do.
pub fn resume(kept: &Kept, declared: &str, policy: Option<Rollout>) -> Resume {
    if policy.is_none() {
        return Resume::AsDeclared;
    }
    if let Some(refusal) = kept.refused.iter().find(|r| r.digest == declared) {
        return Resume::Refused(refusal.clone());
    }
    match (&kept.canary, &kept.stable) {
        (Some(canary), _) if canary.version.digest == declared => Resume::Canary(canary.clone()),
        (_, Some(stable)) if stable.digest != declared => Resume::NewVersion,
        _ => Resume::AsDeclared,
    }
}

/// The newest revision a kept state names (0: none), so revisions go on increasing.
pub fn newest_revision(kept: &Kept) -> u64 {
    let versions = kept.stable.iter().chain(kept.canary.iter().map(|c| &c.version));
    let steps = kept.history.iter().map(|s| s.revision);
    versions.map(|v| v.revision).chain(steps).max().unwrap_or(0)
}

/// Where slots hand their states to be kept, and where a slot finds its own at start.
pub struct Keeper {
    sender: tokio::sync::mpsc::UnboundedSender<Kept>,
    read: Mutex<HashMap<String, Kept>>,
    /// Whether this replica decides rollouts (and so writes them): one that stands by
    /// follows what the deciding one keeps.
    decides: Box<dyn Fn() -> bool + Send + Sync>,
}

impl Keeper {
    /// A keeper starting from the states `read`; what slots keep arrives on the receiver,
    /// newest last (a writer may skip all but a slot's newest).
    pub fn new(
        read: Vec<Kept>,
        decides: impl Fn() -> bool + Send + Sync + 'static,
    ) -> (Self, tokio::sync::mpsc::UnboundedReceiver<Kept>) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let read = read.into_iter().map(|k| (k.slot.clone(), k)).collect();
        let keeper = Self {
            sender,
            read: Mutex::new(read),
            decides: Box::new(decides),
        };
        (keeper, receiver)
    }

    /// The state kept for `slot`, once: a slot resumes from it at its first load.
    pub fn take(&self, slot: &str) -> Option<Kept> {
        self.read.lock().remove(slot)
    }

    pub fn decides(&self) -> bool {
        (self.decides)()
    }

    /// Hands `kept` to the writer (a slot keeps only where this replica decides).
    pub fn keep(&self, kept: Kept) {
        let _ = self.sender.send(kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn version(digest: &str, revision: u64) -> Version {
        Version {
            digest: digest.into(),
            revision,
            source: "hook.wasm".into(),
        }
    }

    fn kept() -> Kept {
        let now = jiff::Timestamp::now();
        Kept {
            slot: "site".into(),
            stable: Some(version("good", 1)),
            canary: Some(KeptCanary {
                version: version("trying", 2),
                started_at: now,
                promote_by: now,
                share: 20,
                tallies: BTreeMap::new(),
            }),
            refused: vec![Refusal {
                digest: "bad".into(),
                reason: "5 of its 5 reconciles failed".into(),
                at: now.to_string(),
            }],
            history: Vec::new(),
        }
    }

    const POLICY: Option<Rollout> = Some(Rollout {
        share: 20,
        promote_after: Duration::from_secs(60),
        max_error_percent: 20,
        min_reconciles: 5,
    });

    #[test]
    fn a_rolled_back_version_stays_refused_and_a_canary_goes_on() {
        let kept = kept();
        assert!(matches!(resume(&kept, "bad", POLICY), Resume::Refused(r) if r.reason.contains("5 of its 5")));
        assert!(matches!(resume(&kept, "trying", POLICY), Resume::Canary(c) if c.share == 20));
        assert_eq!(resume(&kept, "good", POLICY), Resume::AsDeclared);
        assert_eq!(resume(&kept, "newer", POLICY), Resume::NewVersion);
        // No rollout declared any more: the declared version serves, as a reload does.
        assert_eq!(resume(&kept, "bad", None), Resume::AsDeclared);
        assert_eq!(resume(&Kept::default(), "any", POLICY), Resume::AsDeclared);
        assert_eq!(newest_revision(&kept), 2);
    }

    #[test]
    fn a_kept_state_reads_back_as_written_and_tolerates_missing_lists() {
        let kept = kept();
        let text = serde_json::to_string(&kept).unwrap();
        assert_eq!(serde_json::from_str::<Kept>(&text).unwrap(), kept);
        let bare: Kept = serde_json::from_str(r#"{"slot":"site","stable":null,"canary":null}"#).unwrap();
        assert!(bare.refused.is_empty() && bare.history.is_empty());
    }
}
