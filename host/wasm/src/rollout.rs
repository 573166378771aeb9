//! Progressive rollout of a slot's new version (`rollout` in the Katalog): the new version
//! (the canary) serves a share of the CRs, picked by a stable hash of their key, while the
//! last good one serves the rest. The reconciles it serves are counted as they end, per
//! tenant, and only for what the component itself did (a trap, a limit, an error it
//! returned; not a tenant's input the cluster refused); when its failures pass the error
//! percent in most of the tenants it served it is rolled back, so one tenant's failing CRs
//! cannot roll a version back for everyone. After the period within bounds it is promoted to
//! serve every CR. What a rollout decided is kept across restarts ([`crate::kept`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::load::Active;
use orkestra_katalog::component::Rollout;

/// Steps a slot remembers, newest kept.
const HISTORY: usize = 20;
/// Refused versions a slot remembers, newest kept.
const REFUSALS: usize = 20;

/// Whether the CR `key` is in the first `share` percent: the same answer for the same key
/// in every process, so a CR does not flip between versions while a rollout runs.
pub fn in_share(key: &str, share: u32) -> bool {
    let hash = sha2::Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash[..8]);
    (u64::from_be_bytes(first) % 100) < u64::from(share)
}

/// The first 12 hex digits of a digest, as logs, conditions and Events name a version.
pub fn short(digest: &str) -> String {
    digest.chars().take(12).collect()
}

/// Why the version `digest`, rolled back for `why`, does not serve.
pub fn refused_message(digest: &str, why: &str) -> String {
    format!(
        "sha256 {} was rolled back ({why}); it is not rolled out again until the declared component changes",
        short(digest)
    )
}

/// Tenants whose reconciles a canary counts apart; past it, the rest count as one.
const TENANTS_COUNTED: usize = 1024;
/// Tenants a shard member tells apart when it reports its counts; the rest as one.
const TENANTS_REPORTED: usize = 256;
/// Where the tenants past a bound are counted together.
const OTHERS: &str = "(others)";

/// One tenant's reconciles on a canary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub reconciles: u64,
    pub failed: u64,
}

impl Tally {
    /// Saturating: another member's counts come from its Lease, which anyone allowed to
    /// write Leases could fill with the largest numbers.
    fn add(&mut self, other: Tally) {
        self.reconciles = self.reconciles.saturating_add(other.reconciles);
        self.failed = self.failed.saturating_add(other.failed);
    }
}

/// The reconciles a shard member counted on a canary, as it reports them to the member
/// that decides rollouts (which counts the CRs of its own share only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    /// The canary's version: counts of another version are not this one's.
    pub digest: String,
    pub tallies: BTreeMap<String, Tally>,
}

/// A canary's reconciles by tenant, by where they were counted.
#[derive(Default)]
struct Counts {
    /// By this process.
    here: HashMap<Arc<str>, Tally>,
    /// By the replica that decided before (a restart's, or the one this replica follows).
    carried: BTreeMap<String, Tally>,
    /// By the other shard members, as they last reported.
    heard: BTreeMap<String, BTreeMap<String, Tally>>,
}

impl Counts {
    /// Here and carried: what the deciding replica keeps.
    fn kept(&self) -> BTreeMap<String, Tally> {
        let mut all = self.carried.clone();
        for (tenant, tally) in &self.here {
            all.entry(tenant.to_string()).or_default().add(*tally);
        }
        all
    }

    /// Every count, summed by tenant: what a verdict reads.
    fn all(&self) -> BTreeMap<String, Tally> {
        let mut all = self.kept();
        for (tenant, tally) in self.heard.values().flatten() {
            all.entry(tenant.clone()).or_default().add(*tally);
        }
        all
    }
}

/// A new version serving its share.
pub struct Canary {
    pub active: Arc<Active>,
    pub policy: Rollout,
    started: Instant,
    pub started_at: jiff::Timestamp,
    counts: Mutex<Counts>,
    /// When its counts were last kept.
    kept_at: Mutex<Instant>,
}

/// How often a canary's counts are kept while it runs: a restart loses at most this much of
/// them, and a busy canary costs one write per period.
const KEEP_COUNTS: Duration = Duration::from_secs(5);

/// What becomes of a canary now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Wait,
    Promote,
    /// Why it goes.
    RollBack(String),
}

impl Canary {
    pub fn new(active: Arc<Active>, policy: Rollout) -> Self {
        Self::resumed(active, policy, jiff::Timestamp::now(), BTreeMap::new())
    }

    /// A canary that started at `started_at` (in an earlier process: its period runs on
    /// from then) with the reconciles it had counted.
    pub fn resumed(
        active: Arc<Active>,
        policy: Rollout,
        started_at: jiff::Timestamp,
        tallies: BTreeMap<String, Tally>,
    ) -> Self {
        let ago = jiff::Timestamp::now()
            .duration_since(started_at)
            .try_into()
            .unwrap_or(Duration::ZERO);
        let now = Instant::now();
        Self {
            active,
            policy,
            started: now.checked_sub(ago).unwrap_or(now),
            started_at,
            counts: Mutex::new(Counts {
                carried: tallies,
                ..Counts::default()
            }),
            kept_at: Mutex::new(now),
        }
    }

    /// Whether its counts are due to be kept again (and so, from now, not for a while).
    pub fn due_to_keep(&self) -> bool {
        let mut kept_at = self.kept_at.lock();
        let due = kept_at.elapsed() >= KEEP_COUNTS;
        if due {
            *kept_at = Instant::now();
        }
        due
    }

    /// What is left of its period.
    pub fn left(&self) -> Duration {
        self.policy.promote_after.saturating_sub(self.started.elapsed())
    }

    fn counts(&self) -> parking_lot::MutexGuard<'_, Counts> {
        self.counts.lock()
    }

    /// Takes the reconciles the deciding replica kept (a replica that does not decide
    /// follows them beside its own).
    pub fn follow_tallies(&self, tallies: &BTreeMap<String, Tally>) {
        self.counts().carried = tallies.clone();
    }

    /// Takes what each other shard member last reported for this version; a member not
    /// in `reports` any more (gone, or its canary ended) counts no more.
    pub fn hear(&self, reports: BTreeMap<String, BTreeMap<String, Tally>>) {
        self.counts().heard = reports;
    }

    /// Its reconciles by tenant, as the deciding replica keeps them across restarts.
    pub fn tallies_by_tenant(&self) -> BTreeMap<String, Tally> {
        self.counts().kept()
    }

    /// The reconciles this process counted, as a shard member reports them: the busiest
    /// tenants apart, the rest as one.
    pub fn counted_here(&self) -> Counted {
        let counts = self.counts();
        let mut busiest: Vec<(&Arc<str>, &Tally)> = counts.here.iter().collect();
        busiest.sort_by(|a, b| b.1.reconciles.cmp(&a.1.reconciles).then(a.0.cmp(b.0)));
        let mut tallies = BTreeMap::new();
        for (rank, (tenant, tally)) in busiest.into_iter().enumerate() {
            let tenant = match rank < TENANTS_REPORTED {
                true => tenant.to_string(),
                false => OTHERS.to_string(),
            };
            tallies.entry(tenant).or_insert_with(Tally::default).add(*tally);
        }
        Counted {
            digest: self.active.loaded.digest.clone(),
            tallies,
        }
    }

    fn tallies(&self) -> Vec<Tally> {
        self.counts().all().into_values().collect()
    }

    /// One reconcile it served for `tenant` ended, well or with a failure of its own.
    pub fn count(&self, tenant: &Arc<str>, ok: bool) {
        let mut counts = self.counts();
        let here = &mut counts.here;
        let key = match here.len() >= TENANTS_COUNTED && !here.contains_key(tenant) {
            true => OTHERS.into(),
            false => tenant.clone(),
        };
        here.entry(key).or_default().add(Tally {
            reconciles: 1,
            failed: u64::from(!ok),
        });
    }

    /// What becomes of it now ([`judge`]).
    pub fn verdict(&self) -> Verdict {
        judge(&self.policy, &self.tallies(), self.started.elapsed())
    }

    /// As the Live API shows it.
    pub fn view(&self) -> CanaryView {
        let tallies = self.tallies();
        let (reconciles, failed) = totals(&tallies);
        CanaryView {
            revision: self.active.revision,
            digest: self.active.loaded.digest.clone(),
            started_at: self.started_at.to_string(),
            promotes_in_ms: self.left().as_millis() as u64,
            reconciles,
            failed,
            tenants: tallies.len(),
        }
    }
}

fn totals(tallies: &[Tally]) -> (u64, u64) {
    let mut total = Tally::default();
    tallies.iter().for_each(|t| total.add(*t));
    (total.reconciles, total.failed)
}

/// Rolled back once at least `minReconciles` of its reconciles ended and more than
/// `maxErrorPercent` of them failed in most of the tenants it served (`tallies`, one each);
/// at the end of its period, promoted when they are within bounds, however few, and rolled
/// back when not.
pub fn judge(policy: &Rollout, tallies: &[Tally], elapsed: std::time::Duration) -> Verdict {
    // In u128: counts heard from other members may be as large as a u64 holds.
    let past = |t: &Tally| u128::from(t.failed) * 100 > u128::from(policy.max_error_percent) * u128::from(t.reconciles);
    let served: Vec<&Tally> = tallies.iter().filter(|t| t.reconciles > 0).collect();
    let failing = served.iter().filter(|t| past(t)).count();
    let (reconciles, failed) = totals(tallies);
    let over = failing * 2 > served.len();
    let due = elapsed >= policy.promote_after;
    if over && (due || reconciles >= u64::from(policy.min_reconciles)) {
        let tenants = match served.len() {
            1 => String::new(),
            n => format!(", in {failing} of the {n} tenants it served"),
        };
        return Verdict::RollBack(format!(
            "{failed} of its {reconciles} reconciles failed ({}%), more than rollout.maxErrorPercent {}{tenants}",
            u128::from(failed) * 100 / u128::from(reconciles.max(1)),
            policy.max_error_percent
        ));
    }
    match due {
        true => Verdict::Promote,
        false => Verdict::Wait,
    }
}

/// A canary as the Live API shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CanaryView {
    pub revision: u64,
    pub digest: String,
    pub started_at: String,
    pub promotes_in_ms: u64,
    pub reconciles: u64,
    /// Reconciles that failed for what the component did.
    pub failed: u64,
    /// Tenants it served.
    pub tenants: usize,
}

/// What a rollout did, step by step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// A new version serves its share.
    Started,
    /// It serves every CR.
    Promoted,
    /// The last good version serves every CR again.
    RolledBack,
    /// The declared version went back to the one serving before the canary finished.
    Cancelled,
}

/// One step of a rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub at: String,
    pub step: StepKind,
    pub revision: u64,
    pub digest: String,
    pub message: String,
}

/// A version rolled back, and why: not rolled out again while it is declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub digest: String,
    pub reason: String,
    pub at: String,
}

/// A slot's rollout state: the canary, if one runs, its last steps, and the versions rolled
/// back (newest last).
#[derive(Default)]
pub struct Rollouts {
    pub canary: Option<Arc<Canary>>,
    pub history: VecDeque<Step>,
    pub refusals: VecDeque<Refusal>,
    /// The newest revision a kept state named: revisions go on from it after a restart.
    pub kept_revision: u64,
}

impl Rollouts {
    /// Why `digest` was rolled back, if it was.
    pub fn refusal(&self, digest: &str) -> Option<&Refusal> {
        self.refusals.iter().find(|r| r.digest == digest)
    }

    /// The version rolled back last.
    pub fn last_refused(&self) -> Option<&str> {
        self.refusals.back().map(|r| r.digest.as_str())
    }

    pub fn refuse(&mut self, digest: &str, reason: String) {
        self.refusals.retain(|r| r.digest != digest);
        if self.refusals.len() >= REFUSALS {
            self.refusals.pop_front();
        }
        self.refusals.push_back(Refusal {
            digest: digest.to_string(),
            reason,
            at: jiff::Timestamp::now().to_string(),
        });
    }

    /// `digest` serves every CR by declaration (no rollout declared): no longer refused.
    pub fn forgive(&mut self, digest: &str) {
        self.refusals.retain(|r| r.digest != digest);
    }

    pub fn step(&mut self, step: StepKind, active: &Active, message: String) {
        if self.history.len() >= HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(Step {
            at: jiff::Timestamp::now().to_string(),
            step,
            revision: active.revision,
            digest: active.loaded.digest.clone(),
            message,
        });
    }

    /// The newest revision a canary had (0: none ran).
    pub fn newest(&self) -> u64 {
        let canary = self.canary.as_ref().map_or(0, |c| c.active.revision);
        let stepped = self.history.iter().map(|s| s.revision).max().unwrap_or(0);
        canary.max(stepped).max(self.kept_revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_picks_about_its_percent_of_keys_and_the_same_keys_every_time() {
        let keys: Vec<String> = (0..2000).map(|i| format!("team-{}/site-{i}", i % 7)).collect();
        let picked = keys.iter().filter(|k| in_share(k, 20)).count();
        assert!((300..=500).contains(&picked), "{picked} of 2000 at 20%");
        for key in &keys {
            assert_eq!(in_share(key, 20), in_share(key, 20));
            if in_share(key, 20) {
                assert!(in_share(key, 50), "a larger share keeps the keys of a smaller one");
            }
        }
        assert!(!keys.iter().any(|k| in_share(k, 0)));
    }

    #[test]
    fn a_canary_is_rolled_back_past_its_error_percent_and_promoted_at_the_end_of_its_period() {
        use std::time::Duration;
        let policy = Rollout {
            share: 20,
            promote_after: Duration::from_secs(60),
            max_error_percent: 20,
            min_reconciles: 5,
        };
        let early = Duration::from_secs(1);
        let late = Duration::from_secs(61);
        let one = |reconciles, failed| [Tally { reconciles, failed }];
        assert_eq!(judge(&policy, &[], early), Verdict::Wait);
        assert_eq!(judge(&policy, &one(4, 4), early), Verdict::Wait, "too few to count yet");
        assert_eq!(judge(&policy, &one(5, 1), early), Verdict::Wait, "20% is within bounds");
        let Verdict::RollBack(why) = judge(&policy, &one(5, 2), early) else {
            panic!("40% of 5 is past 20%");
        };
        assert_eq!(
            why,
            "2 of its 5 reconciles failed (40%), more than rollout.maxErrorPercent 20"
        );
        assert_eq!(judge(&policy, &[], late), Verdict::Promote, "no failures: promoted");
        assert_eq!(judge(&policy, &one(5, 1), late), Verdict::Promote);
        assert!(
            matches!(judge(&policy, &one(2, 1), late), Verdict::RollBack(_)),
            "at its end, few reconciles with too many failures still roll back"
        );
        let strict = Rollout {
            max_error_percent: 0,
            ..policy
        };
        assert!(matches!(judge(&strict, &one(5, 1), early), Verdict::RollBack(_)));
    }

    #[test]
    fn counts_made_here_carried_and_heard_add_up_by_tenant_and_only_the_first_two_are_kept() {
        let tally = |reconciles, failed| Tally { reconciles, failed };
        let mut counts = Counts::default();
        counts.here.insert("team-a".into(), tally(2, 0));
        counts.carried.insert("team-a".into(), tally(1, 1));
        counts.heard.insert(
            "member-two".into(),
            BTreeMap::from([("team-a".into(), tally(3, 3)), ("team-b".into(), tally(4, 4))]),
        );
        let all = counts.all();
        assert_eq!(all["team-a"], tally(6, 4));
        assert_eq!(all["team-b"], tally(4, 4));
        // What another member counted is its own to report, never kept here.
        assert_eq!(counts.kept(), BTreeMap::from([("team-a".into(), tally(3, 1))]));
        // Judged on its own the canary waits; with the other member's reconciles it goes.
        let policy = Rollout {
            share: 50,
            promote_after: std::time::Duration::from_secs(60),
            max_error_percent: 20,
            min_reconciles: 3,
        };
        let early = std::time::Duration::from_secs(1);
        let here: Vec<Tally> = counts.here.values().copied().collect();
        assert_eq!(judge(&policy, &here, early), Verdict::Wait);
        let all: Vec<Tally> = all.into_values().collect();
        assert!(matches!(judge(&policy, &all, early), Verdict::RollBack(_)));
    }

    #[test]
    fn counts_at_the_largest_numbers_saturate_instead_of_overflowing() {
        let policy = Rollout {
            share: 50,
            promote_after: std::time::Duration::from_secs(60),
            max_error_percent: 20,
            min_reconciles: 3,
        };
        let huge = Tally {
            reconciles: u64::MAX,
            failed: u64::MAX,
        };
        let mut sum = huge;
        sum.add(huge);
        assert_eq!(sum, huge);
        let verdict = judge(&policy, &[huge, huge], std::time::Duration::from_secs(1));
        assert!(matches!(verdict, Verdict::RollBack(_)), "{verdict:?}");
    }

    #[test]
    fn one_tenants_failures_do_not_roll_a_canary_back_for_the_others() {
        use std::time::Duration;
        let policy = Rollout {
            share: 50,
            promote_after: Duration::from_secs(60),
            max_error_percent: 20,
            min_reconciles: 5,
        };
        let early = Duration::from_secs(1);
        let tally = |reconciles, failed| Tally { reconciles, failed };
        // A hostile tenant's ten failing CRs, another tenant's five good ones.
        let one_bad = [tally(10, 10), tally(5, 0)];
        assert_eq!(judge(&policy, &one_bad, early), Verdict::Wait);
        assert_eq!(judge(&policy, &one_bad, Duration::from_secs(61)), Verdict::Promote);
        // Failing for most tenants it served: a fault of the version.
        let Verdict::RollBack(why) = judge(&policy, &[tally(3, 3), tally(3, 2), tally(4, 0)], early) else {
            panic!("two of three tenants fail");
        };
        assert!(why.ends_with("in 2 of the 3 tenants it served"), "{why}");
    }
}
