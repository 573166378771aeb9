//! Workload `autoscale`: at each reconcile a Deployment's or StatefulSet's replicas take one
//! step up when `scaleUp`'s conditions hold, one down when `scaleDown`'s do, staying within
//! `min` and `max`, and no sooner than `cooldown` after the last step. No timer of its own:
//! the CRD's resync is the tick. The workload itself remembers when it last stepped (the
//! annotation [`SCALED_AT`]), so a restart or another replica of the runtime carries on
//! where it was; between steps the replicas stay as they are, so a settled workload is not
//! written.

use std::time::Duration;

use serde_json::{Value, json};

use super::Declarative;
use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::Scale;

/// Annotation on an autoscaled workload: when its replicas last stepped, RFC 3339.
pub const SCALED_AT: &str = "orkestra.orkspace.io/autoscaled-at";

/// What to run with: the replicas, and whether this is a new step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub replicas: i64,
    pub stepped: bool,
}

/// The replicas after this reconcile. `current` is what runs (or what the template says
/// for a workload not there yet), `since` how long ago the last step was.
pub fn decide(scale: &Scale, current: i64, since: Option<Duration>, up: bool, down: bool) -> Decision {
    let current = current.clamp(scale.min, scale.max);
    let cooled = since.is_none_or(|since| since >= scale.cooldown);
    let step = |replicas: i64| Decision {
        replicas,
        stepped: replicas != current,
    };
    match (&scale.up, &scale.down) {
        (Some((_, by)), _) if cooled && up && current < scale.max => step((current + by).min(scale.max)),
        (_, Some((_, by))) if cooled && down && current > scale.min => step((current - by).max(scale.min)),
        _ => step(current),
    }
}

impl Declarative {
    /// Sets `rendered`'s replicas from the entry's autoscale, against the workload as the
    /// owned-kind watch last saw it; a new step also stamps its time.
    pub(super) fn scale(&self, scale: &Scale, resolver: &Resolver<'_, '_>, rendered: &mut Value, now: jiff::Timestamp) {
        let live = self.applier.seen(rendered);
        let running = live.as_ref().and_then(|l| l["spec"]["replicas"].as_i64());
        let current = running
            .or_else(|| rendered["spec"]["replicas"].as_i64())
            .unwrap_or(scale.min);
        let stamped = live
            .as_ref()
            .and_then(|l| l["metadata"]["annotations"][SCALED_AT].as_str().map(String::from));
        let since = stamped
            .as_deref()
            .and_then(|at| at.parse::<jiff::Timestamp>().ok())
            .and_then(|at| Duration::try_from(now.duration_since(at)).ok());
        let holds = |step: &Option<(orkestra_expr::condition::Conditions, i64)>| {
            step.as_ref()
                .is_some_and(|(conditions, _)| conditions.passes(resolver, None))
        };
        let decision = decide(scale, current, since, holds(&scale.up), holds(&scale.down));
        rendered["spec"]["replicas"] = json!(decision.replicas);
        let stamp = match decision.stepped {
            true => Some(orkestra_expr::calendar::rfc3339(now)),
            false => stamped,
        };
        if let Some(stamp) = stamp {
            rendered["metadata"]["annotations"][SCALED_AT] = json!(stamp);
        }
        if decision.stepped {
            tracing::info!(
                workload = %rendered["metadata"]["name"], from = current,
                to = decision.replicas, "autoscale: replicas stepped"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orkestra_expr::condition::Conditions;

    fn scale() -> Scale {
        Scale {
            min: 2,
            max: 5,
            cooldown: Duration::from_secs(60),
            up: Some((Conditions::default(), 2)),
            down: Some((Conditions::default(), 1)),
        }
    }

    #[test]
    fn one_step_at_a_time_within_the_bounds_and_after_the_cooldown() {
        let scale = scale();
        let at = |replicas, stepped| Decision { replicas, stepped };
        assert_eq!(decide(&scale, 2, None, true, false), at(4, true), "up by its increment");
        assert_eq!(decide(&scale, 4, None, true, false), at(5, true), "not past max");
        assert_eq!(decide(&scale, 5, None, true, false), at(5, false));
        assert_eq!(
            decide(&scale, 4, Some(Duration::from_secs(10)), true, false),
            at(4, false),
            "cooling down"
        );
        assert_eq!(
            decide(&scale, 4, Some(Duration::from_secs(60)), false, true),
            at(3, true)
        );
        assert_eq!(decide(&scale, 2, None, false, true), at(2, false), "not below min");
        assert_eq!(
            decide(&scale, 9, None, false, false),
            at(5, false),
            "out of bounds comes back in, no step"
        );
        assert_eq!(
            decide(&scale, 3, None, false, false),
            at(3, false),
            "nothing holds: as it runs"
        );
        assert_eq!(
            decide(&scale, 3, None, true, true),
            at(5, true),
            "up wins when both hold"
        );
    }
}
