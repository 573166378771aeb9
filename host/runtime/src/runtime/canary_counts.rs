//! Shard mode: each member serves the CRs of its own share, so it alone sees how a canary
//! did on them. A member that does not decide rollouts publishes what it counted on its
//! member Lease (renewed anyway: no write of its own); the member that decides reads the
//! others' from their Leases and judges every member's reconciles together. Without this a
//! version failing only on the CRs of the members that do not decide would never be rolled
//! back.

use std::collections::BTreeMap;
use std::time::Duration;

use orkestra_wasm::Components;
use orkestra_wasm::rollout::Counted;

use crate::ha::Ownership;

/// How often counts move between the slots and the Leases: well under a renewal period.
const PERIOD: Duration = Duration::from_secs(1);

/// Runs for the runtime's life: publishes this member's counts, hands the others' to the
/// slots.
pub async fn share(components: Components, ownership: Ownership) {
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        // The deciding member's counts are in the rollout state it keeps.
        let counted = components.counted();
        let publish = (!ownership.decides_rollouts() && !counted.is_empty()).then(|| encode(&counted));
        ownership.publish_counts(publish);
        components.hear(&decode(ownership.counts_heard()));
    }
}

fn encode(counted: &BTreeMap<String, Counted>) -> String {
    serde_json::to_string(counted).unwrap_or_default()
}

/// The members' counts by member then slot; a member's text that does not read (another
/// release's, or written by hand) is left out.
fn decode(heard: Vec<(String, String)>) -> BTreeMap<String, BTreeMap<String, Counted>> {
    heard
        .into_iter()
        .filter_map(|(member, text)| match serde_json::from_str(&text) {
            Ok(counted) => Some((member, counted)),
            Err(error) => {
                tracing::debug!(%member, %error, "a member's canary counts do not read; left out");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use orkestra_wasm::rollout::Tally;

    #[test]
    fn counts_read_back_by_member_and_slot_and_a_bad_text_is_left_out() {
        let counted = BTreeMap::from([(
            "site".to_string(),
            Counted {
                digest: "abc".into(),
                tallies: BTreeMap::from([(
                    "team-a".into(),
                    Tally {
                        reconciles: 3,
                        failed: 2,
                    },
                )]),
            },
        )]);
        let heard = decode(vec![
            ("two".into(), encode(&counted)),
            ("three".into(), "{not json".into()),
        ]);
        assert_eq!(heard.len(), 1);
        assert_eq!(heard["two"], counted);
    }
}
