//! Whether a child object is ready: a Deployment Available with every replica updated, a Job
//! complete, a Pod Ready, a claim Bound, a custom resource whose own `Ready` condition is true.
//! The rules follow the conventions clusters already agree on (the ones `kubectl rollout
//! status` and kstatus apply), so "ready" here means what it means elsewhere.
//!
//! Pure: objects in, a verdict out. Health reads it for `healthyWhen: childrenReady`.

use serde_json::Value;

/// Where one object stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Still converging; says on what.
    Waiting(String),
    /// Will not get there by itself (a failed Job, a rollout past its deadline).
    Failed(String),
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        matches!(self, Readiness::Ready)
    }
}

/// The readiness of `object` as the API server last returned it.
pub fn of(object: &Value) -> Readiness {
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let status = &object["status"];
    let label = |why: String| format!("{kind} {name}: {why}");
    // A controller that has not seen the current spec has not acted on it yet.
    if let (Some(generation), Some(observed)) = (
        object["metadata"]["generation"].as_i64(),
        status["observedGeneration"].as_i64(),
    ) && observed < generation
    {
        return Readiness::Waiting(label(format!("generation {generation} not observed yet")));
    }
    let verdict = match (group(object), kind) {
        ("apps", "Deployment") => deployment(object),
        ("apps", "StatefulSet") => stateful_set(object),
        ("apps", "ReplicaSet") => replicas_ready(object, "availableReplicas", "available"),
        ("apps", "DaemonSet") => daemon_set(status),
        ("batch", "Job") => job(status),
        ("", "Pod") => pod(status),
        ("", "PersistentVolumeClaim") => phase(status, "Bound"),
        ("", "Namespace") => match status["phase"].as_str() {
            Some("Terminating") => Readiness::Waiting("terminating".into()),
            _ => Readiness::Ready,
        },
        ("", "Service") => service(object),
        ("", "ReplicationController") => replicas_ready(object, "readyReplicas", "ready"),
        _ => by_conditions(status),
    };
    match verdict {
        Readiness::Ready => Readiness::Ready,
        Readiness::Waiting(why) => Readiness::Waiting(label(why)),
        Readiness::Failed(why) => Readiness::Failed(label(why)),
    }
}

/// What holds a set of objects back: the first that is not ready, and how many others are
/// not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holdouts {
    first: Option<String>,
    more: usize,
}

impl Holdouts {
    /// Takes in one object as the API server returned it.
    pub fn see(&mut self, object: &Value) {
        match of(object) {
            Readiness::Ready => {}
            Readiness::Waiting(why) | Readiness::Failed(why) if self.first.is_none() => self.first = Some(why),
            _ => self.more += 1,
        }
    }

    /// Both sets' holdouts, this one's first.
    pub fn and(self, other: Holdouts) -> Holdouts {
        match (self.first, other.first) {
            (Some(first), other_first) => Holdouts {
                first: Some(first),
                more: self.more + other.more + usize::from(other_first.is_some()),
            },
            (None, first) => Holdouts {
                first,
                more: other.more,
            },
        }
    }

    /// `None` when every object seen is ready.
    pub fn summary(&self) -> Option<String> {
        let first = self.first.as_ref()?;
        Some(match self.more {
            0 => first.clone(),
            n => format!("{first} (and {n} more not ready)"),
        })
    }
}

fn group(object: &Value) -> &str {
    object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(group, _)| group)
}

/// `spec.replicas`, which the API server defaults to 1.
fn desired(object: &Value) -> i64 {
    object["spec"]["replicas"].as_i64().unwrap_or(1)
}

fn count(status: &Value, field: &str) -> i64 {
    status[field].as_i64().unwrap_or(0)
}

fn condition<'v>(status: &'v Value, kind: &str) -> Option<&'v Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"].as_str() == Some(kind))
}

fn condition_is(status: &Value, kind: &str, value: &str) -> bool {
    condition(status, kind).is_some_and(|c| c["status"].as_str() == Some(value))
}

fn deployment(object: &Value) -> Readiness {
    let status = &object["status"];
    if condition(status, "Progressing").is_some_and(|c| c["reason"].as_str() == Some("ProgressDeadlineExceeded")) {
        return Readiness::Failed("rollout exceeded its progress deadline".into());
    }
    let want = desired(object);
    let (updated, available, total) = (
        count(status, "updatedReplicas"),
        count(status, "availableReplicas"),
        count(status, "replicas"),
    );
    if updated < want {
        Readiness::Waiting(format!("{updated} of {want} replicas updated"))
    } else if total > updated {
        Readiness::Waiting(format!("{} old replicas pending termination", total - updated))
    } else if available < want {
        Readiness::Waiting(format!("{available} of {want} replicas available"))
    } else {
        Readiness::Ready
    }
}

fn stateful_set(object: &Value) -> Readiness {
    let status = &object["status"];
    let want = desired(object);
    let ready = count(status, "readyReplicas");
    let rolling = object["spec"]["updateStrategy"]["type"]
        .as_str()
        .unwrap_or("RollingUpdate")
        == "RollingUpdate";
    if ready < want {
        return Readiness::Waiting(format!("{ready} of {want} replicas ready"));
    }
    let (current, update) = (&status["currentRevision"], &status["updateRevision"]);
    if rolling && update.is_string() && current != update {
        return Readiness::Waiting(format!(
            "{} of {want} replicas updated",
            count(status, "updatedReplicas")
        ));
    }
    Readiness::Ready
}

fn replicas_ready(object: &Value, field: &str, word: &str) -> Readiness {
    let (want, have) = (desired(object), count(&object["status"], field));
    match have >= want {
        true => Readiness::Ready,
        false => Readiness::Waiting(format!("{have} of {want} replicas {word}")),
    }
}

fn daemon_set(status: &Value) -> Readiness {
    let want = count(status, "desiredNumberScheduled");
    let (updated, available) = (
        count(status, "updatedNumberScheduled"),
        count(status, "numberAvailable"),
    );
    if updated < want {
        Readiness::Waiting(format!("{updated} of {want} pods updated"))
    } else if available < want {
        Readiness::Waiting(format!("{available} of {want} pods available"))
    } else {
        Readiness::Ready
    }
}

fn job(status: &Value) -> Readiness {
    if condition_is(status, "Complete", "True") {
        Readiness::Ready
    } else if let Some(failed) = condition(status, "Failed").filter(|c| c["status"].as_str() == Some("True")) {
        Readiness::Failed(format!(
            "failed: {}",
            failed["message"].as_str().unwrap_or("no message")
        ))
    } else {
        Readiness::Waiting(format!("{} active, not complete", count(status, "active")))
    }
}

fn pod(status: &Value) -> Readiness {
    match status["phase"].as_str() {
        Some("Succeeded") => Readiness::Ready,
        Some("Failed") => Readiness::Failed("the pod failed".into()),
        _ if condition_is(status, "Ready", "True") => Readiness::Ready,
        phase => Readiness::Waiting(format!("{}, not ready", phase.unwrap_or("not scheduled"))),
    }
}

fn phase(status: &Value, wanted: &str) -> Readiness {
    match status["phase"].as_str() {
        Some(phase) if phase == wanted => Readiness::Ready,
        phase => Readiness::Waiting(format!("{} (waiting for {wanted})", phase.unwrap_or("no phase yet"))),
    }
}

fn service(object: &Value) -> Readiness {
    let load_balancer = object["spec"]["type"].as_str() == Some("LoadBalancer");
    let ingress = object["status"]["loadBalancer"]["ingress"]
        .as_array()
        .is_some_and(|i| !i.is_empty());
    match !load_balancer || ingress {
        true => Readiness::Ready,
        false => Readiness::Waiting("no load balancer address yet".into()),
    }
}

/// Any other kind: its own `Ready` condition when it has one (the common convention for
/// custom resources), `Stalled`/`Reconciling` as kstatus reads them; else present is ready.
fn by_conditions(status: &Value) -> Readiness {
    let said = |c: &Value| {
        let reason = c["reason"].as_str().unwrap_or_default();
        let message = c["message"].as_str().unwrap_or_default();
        format!(
            "{reason}{}{message}",
            if reason.is_empty() || message.is_empty() {
                ""
            } else {
                ": "
            }
        )
    };
    if let Some(stalled) = condition(status, "Stalled").filter(|c| c["status"].as_str() == Some("True")) {
        return Readiness::Failed(format!("stalled: {}", said(stalled)));
    }
    if let Some(ready) = condition(status, "Ready") {
        return match ready["status"].as_str() {
            Some("True") => Readiness::Ready,
            _ => Readiness::Waiting(format!("not Ready: {}", said(ready))),
        };
    }
    if condition_is(status, "Reconciling", "True") {
        return Readiness::Waiting("reconciling".into());
    }
    Readiness::Ready
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(replicas: i64, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "generation": 2},
               "spec": {"replicas": replicas}, "status": status})
    }

    #[test]
    fn a_deployment_is_ready_when_every_replica_is_updated_and_available() {
        let table = [
            (json!({}), Some("0 of 2 replicas updated")),
            (
                json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
                Some("generation 2 not observed"),
            ),
            (
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 2}),
                Some("1 old replicas pending termination"),
            ),
            (
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1}),
                Some("1 of 2 replicas available"),
            ),
            (
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
                None,
            ),
        ];
        for (status, want) in table {
            match (of(&deployment(2, status.clone())), want) {
                (Readiness::Ready, None) => {}
                (Readiness::Waiting(why), Some(want)) => assert!(why.contains(want), "{why} for {status}"),
                (got, want) => panic!("{got:?}, wanted {want:?} for {status}"),
            }
        }
        let stuck =
            json!({"conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]});
        assert!(matches!(of(&deployment(1, stuck)), Readiness::Failed(_)));
        let absent_replicas = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
                                     "spec": {}, "status": {"updatedReplicas": 1, "replicas": 1, "availableReplicas": 0}});
        assert_eq!(
            of(&absent_replicas),
            Readiness::Waiting("Deployment w: 0 of 1 replicas available".into()),
            "replicas default to 1, and the verdict names the object"
        );
    }

    #[test]
    fn jobs_pods_claims_and_services_follow_their_own_signals() {
        let job = |conditions: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "status": {"conditions": conditions, "active": 1}});
        assert!(of(&job(json!([{"type": "Complete", "status": "True"}]))).is_ready());
        assert!(
            matches!(of(&job(json!([{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]))), Readiness::Failed(m) if m.contains("BackoffLimitExceeded"))
        );
        assert_eq!(
            of(&job(json!([]))),
            Readiness::Waiting("Job j: 1 active, not complete".into())
        );

        let pod =
            |status: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": status});
        assert!(
            of(&pod(
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
            ))
            .is_ready()
        );
        assert!(of(&pod(json!({"phase": "Succeeded"}))).is_ready());
        assert!(
            !of(&pod(
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]})
            ))
            .is_ready()
        );
        assert!(!of(&pod(json!({}))).is_ready());

        let claim = |phase: &str| json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "status": {"phase": phase}});
        assert!(of(&claim("Bound")).is_ready());
        assert!(!of(&claim("Pending")).is_ready());

        let service = |kind: &str, status: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": kind}, "status": status});
        assert!(of(&service("ClusterIP", json!({}))).is_ready());
        assert!(!of(&service("LoadBalancer", json!({"loadBalancer": {}}))).is_ready());
        assert!(
            of(&service(
                "LoadBalancer",
                json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}})
            ))
            .is_ready()
        );
    }

    #[test]
    fn stateful_sets_and_daemon_sets_wait_for_their_rollout() {
        let set = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {"replicas": 2},
                         "status": {"readyReplicas": 2, "updatedReplicas": 1, "currentRevision": "a", "updateRevision": "b"}});
        assert!(matches!(of(&set), Readiness::Waiting(w) if w.contains("1 of 2 replicas updated")));
        let mut done = set.clone();
        done["status"]["currentRevision"] = json!("b");
        assert!(of(&done).is_ready());
        let daemons = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"},
                             "status": {"desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 2}});
        assert!(matches!(of(&daemons), Readiness::Waiting(w) if w.contains("2 of 3 pods available")));
    }

    #[test]
    fn other_kinds_are_ready_by_their_ready_condition_or_by_existing() {
        let custom = |status: Value| json!({"apiVersion": "db.example.io/v1", "kind": "Database", "metadata": {"name": "main"}, "status": status});
        assert!(of(&custom(json!({}))).is_ready());
        assert!(of(&custom(json!({"conditions": [{"type": "Ready", "status": "True"}]}))).is_ready());
        assert_eq!(
            of(&custom(
                json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning", "message": "2 of 3 volumes"}]})
            )),
            Readiness::Waiting("Database main: not Ready: Provisioning: 2 of 3 volumes".into())
        );
        assert!(matches!(
            of(&custom(json!({"conditions": [{"type": "Stalled", "status": "True"}]}))),
            Readiness::Failed(_)
        ));
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}});
        assert!(of(&config).is_ready());
        // A Deployment named like a core kind in another group is judged by its conditions.
        let foreign = json!({"apiVersion": "example.io/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": 5}});
        assert!(of(&foreign).is_ready());
    }

    #[test]
    fn a_set_reports_its_first_holdout_and_counts_the_rest() {
        let ready = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let claim = |name: &str| json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "status": {"phase": "Pending"}});
        let seen = |objects: &[&Value]| {
            let mut holdouts = Holdouts::default();
            objects.iter().for_each(|o| holdouts.see(o));
            holdouts
        };
        assert_eq!(seen(&[&ready, &ready]).summary(), None);
        let (a, b, c) = (claim("a"), claim("b"), claim("c"));
        assert_eq!(
            seen(&[&ready, &a, &b, &c]).summary().as_deref(),
            Some("PersistentVolumeClaim a: Pending (waiting for Bound) (and 2 more not ready)")
        );
        assert_eq!(
            seen(&[&ready]).and(seen(&[&b, &c])),
            seen(&[&b, &c]),
            "a ready set adds nothing"
        );
        assert_eq!(seen(&[&a]).and(seen(&[&b, &c])), seen(&[&a, &b, &c]));
    }
}
