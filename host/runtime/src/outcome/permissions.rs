//! The permissions the runtime lacks of those its Katalog needs, as the last check at load
//! (or after a reload) found them: per CRD for what its CRs need, and for the runtime's own
//! needs (Leases, the gateway's configurations, its rollout state) under [`RUNTIME`]. The
//! Live API, `/metrics` and the reconciles read it; `runtime::permissions` writes it.

use std::collections::BTreeMap;

use orkestra_katalog::rbac::Need;
use parking_lot::RwLock;
use serde_json::{Value, json};

/// The key of the runtime's own needs.
pub const RUNTIME: &str = "";

/// A permission and the CRD that needs it ([`RUNTIME`] for the runtime's own).
pub type Needed = (String, Need);

/// What the last check found.
#[derive(Debug)]
pub struct Permissions {
    state: RwLock<Checked>,
    /// Moves whenever a check answers or fails.
    changed: tokio::sync::watch::Sender<u64>,
}

impl Default for Permissions {
    fn default() -> Self {
        Self {
            state: RwLock::default(),
            changed: tokio::sync::watch::Sender::new(0),
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Checked {
    /// Whether a check is to come at all (the runtime was asked to check).
    expected: bool,
    /// Whether a check has answered at all.
    done: bool,
    /// Why the last check could not answer, if it could not.
    error: Option<String>,
    missing: BTreeMap<String, Vec<Need>>,
}

impl Permissions {
    /// Keeps what a check found missing, by CRD; returns what changed from the last check
    /// (newly missing, and granted since).
    pub fn found(&self, missing: BTreeMap<String, Vec<Need>>) -> (Vec<Needed>, Vec<Needed>) {
        let mut state = self.state.write();
        let flat = |m: &BTreeMap<String, Vec<Need>>| -> Vec<Needed> {
            m.iter()
                .flat_map(|(crd, needs)| needs.iter().map(move |n| (crd.clone(), n.clone())))
                .collect()
        };
        let (before, after) = (flat(&state.missing), flat(&missing));
        let new: Vec<Needed> = after.iter().filter(|n| !before.contains(n)).cloned().collect();
        let granted: Vec<Needed> = before.into_iter().filter(|n| !after.contains(n)).collect();
        *state = Checked {
            expected: true,
            done: true,
            error: None,
            missing,
        };
        drop(state);
        self.changed.send_modify(|n| *n += 1);
        (new, granted)
    }

    /// Told each time a check answers (or fails).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The check could not answer: what it found before stays.
    pub fn unanswered(&self, why: String) {
        self.state.write().error = Some(why);
        self.changed.send_modify(|n| *n += 1);
    }

    /// A check is on its way: [`Permissions::first_check`] waits for it.
    pub fn expect_check(&self) {
        self.state.write().expected = true;
    }

    /// Waits, at most `bound`, for the first check to answer (or fail), when one is to
    /// come: what the runtime may not do is named before its first reconcile.
    pub async fn first_check(&self, bound: std::time::Duration) {
        let mut changes = self.changes();
        let answered = |state: &Checked| !state.expected || state.done || state.error.is_some();
        let waited = tokio::time::timeout(bound, async {
            while !answered(&self.state.read()) {
                if changes.changed().await.is_err() {
                    return;
                }
            }
        });
        if waited.await.is_err() {
            tracing::warn!(?bound, "the permission check has not answered; reconciling without it");
        }
    }

    /// What the CRD `crd` (or the runtime, [`RUNTIME`]) lacks.
    pub fn missing(&self, crd: &str) -> Vec<Need> {
        self.state.read().missing.get(crd).cloned().unwrap_or_default()
    }

    /// Everything found missing, by CRD.
    pub fn all(&self) -> BTreeMap<String, Vec<Need>> {
        self.state.read().missing.clone()
    }

    /// The report of `crd` for `/katalog/{crd}/health`: whether the check ran, and each
    /// missing permission with the RBAC rule to add.
    pub fn report(&self, crd: &str) -> Value {
        let state = self.state.read();
        let missing: Vec<Value> = state
            .missing
            .get(crd)
            .into_iter()
            .flatten()
            .map(|need| {
                json!({
                    "verb": need.verb,
                    "group": need.group,
                    "resource": need.resource,
                    "namespace": need.namespace(),
                    "name": need.name,
                    "rule": need.rbac_line(),
                })
            })
            .collect();
        json!({"checked": state.done, "error": state.error, "missing": missing})
    }
}

/// What a CR's `PermissionMissing` condition says: each permission its CRD lacks.
pub fn note(missing: &[Need]) -> String {
    let each: Vec<String> = missing.iter().map(ToString::to_string).collect();
    format!("the runtime may not {}", each.join("; "))
}

/// A longer note for the Event: each permission with the RBAC rule that grants it.
pub fn note_with_rules(missing: &[Need]) -> String {
    let each: Vec<String> = missing
        .iter()
        .map(|need| format!("{need} (add to the {})", need.rbac_line()))
        .collect();
    format!("the runtime may not {}", each.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use orkestra_katalog::rbac::Scope;

    fn need(verb: &'static str) -> Need {
        Need {
            scope: Scope::Namespace("shop".into()),
            group: String::new(),
            resource: "configmaps".into(),
            verb,
            name: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_reconcile_waits_for_a_check_to_come_and_no_longer_than_its_bound() {
        let unchecked = Permissions::default();
        let started = tokio::time::Instant::now();
        unchecked.first_check(std::time::Duration::from_secs(10)).await;
        assert_eq!(
            started.elapsed(),
            std::time::Duration::ZERO,
            "no check to come: no wait"
        );

        let permissions = std::sync::Arc::new(Permissions::default());
        permissions.expect_check();
        let answers = permissions.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            answers.found(BTreeMap::new());
        });
        permissions.first_check(std::time::Duration::from_secs(10)).await;
        assert_eq!(
            started.elapsed(),
            std::time::Duration::from_secs(1),
            "until it answered, nothing missing"
        );

        let never = Permissions::default();
        never.expect_check();
        never.first_check(std::time::Duration::from_secs(10)).await;
        assert_eq!(
            started.elapsed(),
            std::time::Duration::from_secs(11),
            "at most the bound"
        );
    }

    #[test]
    fn a_check_says_what_went_missing_and_what_was_granted_since_the_last() {
        let permissions = Permissions::default();
        assert_eq!(permissions.report("web")["checked"], false);
        let (new, granted) = permissions.found(BTreeMap::from([("web".into(), vec![need("create"), need("patch")])]));
        assert_eq!((new.len(), granted.len()), (2, 0));
        let (new, granted) = permissions.found(BTreeMap::from([("web".into(), vec![need("patch")])]));
        assert_eq!((new, granted), (vec![], vec![("web".to_string(), need("create"))]));
        let report = permissions.report("web");
        assert_eq!(report["checked"], true);
        assert_eq!(report["missing"][0]["verb"], "patch");
        assert_eq!(report["missing"][0]["namespace"], "shop");
        assert_eq!(
            report["missing"][0]["rule"],
            r#"Role in namespace shop: {apiGroups: [""], resources: [configmaps], verbs: [patch]}"#
        );
        assert_eq!(
            note(&permissions.missing("web")),
            "the runtime may not patch configmaps in namespace shop"
        );
        assert!(permissions.missing("other").is_empty());
    }
}
