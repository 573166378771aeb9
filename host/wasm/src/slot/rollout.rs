//! A slot's rollout: a new version as a canary on a share of the CRs, judged on its
//! outcomes (here and, for a sharded runtime, as the other members count them), then promoted
//! or rolled back; and a rollout kept in the cluster, resumed after a restart.
use super::*;
use crate::error::Error;

impl Slot {
    pub(super) fn rollouts(&self) -> parking_lot::MutexGuard<'_, Rollouts> {
        self.rollouts.lock()
    }

    /// Starts `loaded` as a canary where the spec declares a rollout and another version
    /// serves; says whether it did (or refused it, as rolled back before). Otherwise the
    /// caller swaps it in for every CR.
    pub(super) fn roll_out(&self, loaded: &Arc<Loaded>, spec: &Arc<Spec>) -> bool {
        let (Some(policy), Some(stable)) = (spec.rollout, self.active()) else {
            return false;
        };
        if stable.loaded.digest == loaded.digest {
            return false;
        }
        let mut rollouts = self.rollouts();
        // The version already rolling out, loaded again (a reload of the whole Katalog): its
        // rollout goes on as it was.
        if rollouts
            .canary
            .as_ref()
            .is_some_and(|c| c.active.loaded.digest == loaded.digest)
        {
            return true;
        }
        if rollouts.refusal(&loaded.digest).is_some() {
            tracing::warn!(component = %self.name, digest = %loaded.digest, "this version was rolled back; it is not rolled out again until the declaration changes");
            return true;
        }
        let revision = stable.revision.max(rollouts.newest()) + 1;
        let canary = Arc::new(Active {
            loaded: loaded.clone(),
            spec: spec.clone(),
            revision,
        });
        if let Some(replaced) = rollouts.canary.take() {
            rollouts.step(
                StepKind::Cancelled,
                &replaced.active,
                "a newer version replaced it".into(),
            );
        }
        let message = format!(
            "serves {}% of the CRs; every CR after {:?} unless more than {}% of its reconciles fail",
            policy.share, policy.promote_after, policy.max_error_percent
        );
        tracing::info!(component = %self.name, revision, digest = %loaded.digest, share = policy.share, "rolling out a new version");
        rollouts.step(StepKind::Started, &canary, message);
        rollouts.canary = Some(Arc::new(Canary::new(canary, policy)));
        self.stats.swapped(Swap::served(revision, &loaded.digest));
        *self.last_error.lock() = None;
        self.judge_after(policy.promote_after, revision);
        true
    }

    /// Judges the canary `revision` once `period` has passed.
    pub(super) fn judge_after(&self, period: Duration, revision: u64) {
        let me = self.me.clone();
        tokio::spawn(async move {
            tokio::time::sleep(period).await;
            if let Some(slot) = me.upgrade() {
                slot.judge(revision);
            }
        });
    }

    /// The version that serves the CR `key`, and which one it is.
    pub fn serving(&self, key: &str) -> Option<(Arc<Active>, Role)> {
        let canary = self.rollouts().canary.clone();
        match canary {
            Some(canary) if in_share(key, canary.policy.share) => Some((
                canary.active.clone(),
                Role::Canary {
                    share: canary.policy.share,
                },
            )),
            _ => self.active().map(|active| (active, Role::Stable)),
        }
    }

    /// A reconcile that `active` served for `tenant` ended (`ok`: without a failure of the
    /// component's own): counted for a canary, which is rolled back as soon as its failures
    /// pass the bound in most of the tenants it served.
    pub fn feedback(&self, active: &Active, tenant: &Arc<str>, ok: bool) {
        let canary = self.rollouts().canary.clone();
        let Some(canary) = canary.filter(|c| c.active.revision == active.revision) else {
            return;
        };
        canary.count(tenant, ok);
        if matches!(canary.verdict(), Verdict::RollBack(_)) {
            self.judge(active.revision);
        } else if canary.due_to_keep() {
            self.keep();
        }
    }

    /// Promotes or rolls back the canary `revision`, as its verdict says (on the replica
    /// that decides rollouts; the others follow what it keeps).
    pub(super) fn judge(&self, revision: u64) {
        if !self.decides() {
            return;
        }
        let verdict = {
            let rollouts = self.rollouts();
            match &rollouts.canary {
                Some(canary) if canary.active.revision == revision => canary.verdict(),
                _ => return,
            }
        };
        match verdict {
            Verdict::Wait => {}
            Verdict::Promote => {
                let _ = self.decide(revision, None);
            }
            Verdict::RollBack(why) => {
                let _ = self.decide(revision, Some(why));
            }
        }
    }

    /// Ends the canary `revision` (any canary: `None`): promoted, or rolled back for `why`.
    /// The step, or why there was none to end.
    pub(super) fn decide(&self, revision: u64, rolled_back: Option<String>) -> Result<Step, Error> {
        let mut rollouts = self.rollouts();
        let Some(canary) = rollouts
            .canary
            .take_if(|c| revision == 0 || c.active.revision == revision)
        else {
            return Err(Error::Rollout(format!(
                "component {} is not rolling out a version",
                self.name
            )));
        };
        let view = canary.view();
        match rolled_back {
            None => {
                let message = format!(
                    "serves every CR; {} of its {} reconciles failed",
                    view.failed, view.reconciles
                );
                tracing::info!(component = %self.name, revision = view.revision, digest = %view.digest, "rollout promoted");
                rollouts.step(StepKind::Promoted, &canary.active, message);
                *self.active.write() = Some(canary.active.clone());
                *self.last_error.lock() = None;
            }
            Some(why) => {
                let stable = self.active().map(|a| short(&a.loaded.digest)).unwrap_or_default();
                let message = format!("rolled back: {why}; sha256 {stable} serves every CR again");
                tracing::warn!(component = %self.name, revision = view.revision, digest = %view.digest, "{message}");
                rollouts.step(StepKind::RolledBack, &canary.active, message);
                rollouts.refuse(&view.digest, why.clone());
                *self.last_error.lock() = Some(refused_message(&view.digest, &why));
            }
        }
        let step = rollouts.history.back().cloned();
        drop(rollouts);
        self.keep();
        self.serves_anew();
        step.ok_or_else(|| Error::Rollout("no step was recorded".into()))
    }

    /// Promotes the rollout under way now, before its period ends.
    pub fn promote(&self) -> Result<Step, Error> {
        self.deciding()?;
        self.decide(0, None)
    }

    /// Rolls the rollout under way back now.
    pub fn roll_back(&self) -> Result<Step, Error> {
        self.deciding()?;
        self.decide(0, Some("rolled back on request".into()))
    }

    pub(super) fn deciding(&self) -> Result<(), Error> {
        match self.decides() {
            true => Ok(()),
            false => Err(Error::Rollout(format!(
                "this replica does not decide the rollouts of component {}: the leader does (in shard mode, the one member that holds them); ask it",
                self.name
            ))),
        }
    }

    /// Whether the version last declared was rolled back (and the one before serves).
    pub fn rolled_back(&self) -> bool {
        let rollouts = self.rollouts();
        let last = rollouts.history.back();
        last.is_some_and(|s| s.step == StepKind::RolledBack && rollouts.refusal(&s.digest).is_some())
    }

    /// The last step of its rollouts, if one ran.
    pub fn last_step(&self) -> Option<Step> {
        self.rollouts().history.back().cloned()
    }

    pub(super) fn rollout_view(&self, declared: &Spec) -> Option<RolloutView> {
        let rollouts = self.rollouts();
        let policy = declared.rollout.map(|p| {
            serde_json::json!({
                "share": p.share,
                "promoteAfterMs": p.promote_after.as_millis() as u64,
                "maxErrorPercent": p.max_error_percent,
                "minReconciles": p.min_reconciles,
            })
        });
        if policy.is_none() && rollouts.history.is_empty() {
            return None;
        }
        Some(RolloutView {
            policy,
            canary: rollouts.canary.as_ref().map(|c| c.view()),
            refused: rollouts.last_refused().map(str::to_string),
            refusals: rollouts.refusals.iter().cloned().collect(),
            history: rollouts.history.iter().cloned().collect(),
        })
    }

    /// Keeps its rollout state with `keeper` from now on, and resumes from what it kept at
    /// the next load.
    pub fn keep_with(&self, keeper: Arc<Keeper>) {
        *self.kept.lock() = keeper.take(&self.name);
        *self.keeper.write() = Some(keeper);
    }

    pub(super) fn keeper(&self) -> Option<Arc<Keeper>> {
        self.keeper.read().clone()
    }

    /// Whether this replica decides its rollouts (one without a keeper always does).
    pub(super) fn decides(&self) -> bool {
        self.keeper().is_none_or(|k| k.decides())
    }

    /// Hands its rollout state to the keeper: only a slot that declares a rollout or ran one
    /// has any, so other slots never cost a write.
    pub(super) fn keep(&self) {
        let Some(keeper) = self.keeper().filter(|k| k.decides()) else {
            return;
        };
        let declares = self.declared().rollout.is_some();
        let version = |active: &Active| Version {
            digest: active.loaded.digest.clone(),
            revision: active.revision,
            source: active.spec.source.to_string(),
        };
        let kept = {
            let rollouts = self.rollouts();
            if !declares && rollouts.history.is_empty() && rollouts.refusals.is_empty() {
                return;
            }
            let canary = rollouts.canary.as_ref().map(|c| KeptCanary {
                version: version(&c.active),
                started_at: c.started_at,
                promote_by: c.started_at + c.policy.promote_after,
                share: c.policy.share,
                tallies: c.tallies_by_tenant(),
            });
            Kept {
                slot: self.name.to_string(),
                stable: self.active().map(|a| version(&a)),
                canary,
                refused: rollouts.refusals.iter().cloned().collect(),
                history: rollouts.history.iter().cloned().collect(),
            }
        };
        keeper.keep(kept);
    }

    /// At its first load, with a state kept by an earlier process: the rollouts' history and
    /// refusals carry on, and what serves follows [`super::kept::resume`]. A version rolled
    /// back stays refused, a canary goes on with its share and the rest of its period. Says
    /// whether it decided what serves (else the declared version is swapped in as usual).
    pub(super) async fn resume(&self, kept: Kept, loaded: &Arc<Loaded>, spec: &Arc<Spec>) -> bool {
        kept.restore_into(&mut self.rollouts());
        match crate::kept::resume(&kept, &loaded.digest, spec.rollout) {
            Resume::AsDeclared => {
                let Some(same) = kept.stable.as_ref().filter(|v| v.digest == loaded.digest) else {
                    return false;
                };
                // The version that served before: under the revision it had.
                self.stats.swapped(Swap::served(same.revision, &loaded.digest));
                let active = Active {
                    loaded: loaded.clone(),
                    spec: spec.clone(),
                    revision: same.revision,
                };
                *self.active.write() = Some(Arc::new(active));
                true
            }
            Resume::Refused(refusal) => {
                let error = match self.serve_kept_stable(&kept, loaded, spec).await {
                    Ok(()) => refused_message(&refusal.digest, &refusal.reason),
                    Err(missing) => format!(
                        "sha256 {} was rolled back ({}) and the last good version is not available here ({missing}): nothing serves until the declared component changes",
                        short(&refusal.digest),
                        refusal.reason
                    ),
                };
                tracing::warn!(component = %self.name, digest = %refusal.digest, "{error}");
                *self.last_error.lock() = Some(error);
                true
            }
            Resume::Canary(canary) => {
                let Some(policy) = spec.rollout else {
                    return false;
                };
                if let Err(missing) = self.serve_kept_stable(&kept, loaded, spec).await {
                    tracing::error!(component = %self.name, %missing, "the rollout's last good version is not available here: only the canary's share of the CRs is served");
                }
                let revision = canary.version.revision;
                let active = Arc::new(Active {
                    loaded: loaded.clone(),
                    spec: spec.clone(),
                    revision,
                });
                let resumed = Canary::resumed(active, policy, canary.started_at, canary.tallies);
                let left = resumed.left();
                tracing::info!(component = %self.name, revision, digest = %loaded.digest, left_ms = left.as_millis() as u64, "rollout resumed");
                self.rollouts().canary = Some(Arc::new(resumed));
                self.judge_after(left, revision);
                true
            }
            Resume::NewVersion => {
                self.serve_kept_stable(&kept, loaded, spec).await.is_ok() && self.roll_out(loaded, spec)
            }
        }
    }

    /// Serves the last good version `kept` names for every CR, when it is another than
    /// `loaded` and kept here; why not, otherwise.
    pub(super) async fn serve_kept_stable(&self, kept: &Kept, loaded: &Loaded, spec: &Arc<Spec>) -> Result<(), Error> {
        let version = match &kept.stable {
            Some(version) if version.digest != loaded.digest => version,
            _ => return Err(Error::Rollout("no other version was kept".into())),
        };
        let stable = self.load_kept(version, spec).await?;
        *self.active.write() = Some(stable);
        Ok(())
    }

    /// The kept version `version` under `spec`, loaded by its digest (from the host's store
    /// of kept components: never from a source the kept state names).
    pub(super) async fn load_kept(&self, version: &Version, spec: &Arc<Spec>) -> Result<Arc<Active>, Error> {
        let pinned = Arc::new(Spec {
            sha256: Some(version.digest.clone()),
            ..(**spec).clone()
        });
        let loaded = self
            .host
            .load_kept(&pinned)
            .await
            .map_err(|e| Error::Rollout(e.to_string()))?;
        self.stats.swapped(Swap::served(version.revision, &loaded.digest));
        Ok(Arc::new(Active {
            loaded: Arc::new(loaded),
            spec: pinned,
            revision: version.revision,
        }))
    }

    /// On a replica that stands by: takes what the deciding one kept, so that a take-over
    /// starts where it was (a version it rolled back no longer serves here, one it promoted
    /// serves every CR, its canary's counts go on).
    pub fn follow(&self, kept: &Kept) {
        if self.decides() {
            return;
        }
        let mut rollouts = self.rollouts();
        kept.restore_into(&mut rollouts);
        let Some(canary) = rollouts.canary.clone() else {
            return;
        };
        let digest = canary.active.loaded.digest.as_str();
        let ended = if let Some(refusal) = rollouts.refusal(digest) {
            let message = refused_message(digest, &refusal.reason);
            rollouts.canary = None;
            *self.last_error.lock() = Some(message);
            true
        } else if kept.stable.as_ref().is_some_and(|s| s.digest == digest) {
            rollouts.canary = None;
            *self.active.write() = Some(canary.active.clone());
            true
        } else {
            if let Some(theirs) = kept.canary.as_ref().filter(|c| c.version.digest == digest) {
                canary.follow_tallies(&theirs.tallies);
            }
            false
        };
        drop(rollouts);
        // As where it was decided.
        if ended {
            self.serves_anew();
        }
    }

    /// What this process counted on its canary, for a shard member to report to the one
    /// that decides (none without a canary, or before it served a reconcile here).
    pub fn counted(&self) -> Option<Counted> {
        let canary = self.rollouts().canary.clone()?;
        Some(canary.counted_here()).filter(|c| !c.tallies.is_empty())
    }

    /// Takes what the other shard members counted on its canary (`reports`, by member; a
    /// report of another version is left out). On the replica that decides, a canary whose
    /// failures pass the bound once every member's reconciles are counted is rolled back
    /// at once.
    pub fn hear(&self, reports: &BTreeMap<String, Counted>) {
        let Some(canary) = self.rollouts().canary.clone() else {
            return;
        };
        let digest = &canary.active.loaded.digest;
        let heard = reports
            .iter()
            .filter(|(_, counted)| &counted.digest == digest)
            .map(|(member, counted)| (member.clone(), counted.tallies.clone()))
            .collect();
        canary.hear(heard);
        if matches!(canary.verdict(), Verdict::RollBack(_)) {
            self.judge(canary.active.revision);
        }
    }
}
