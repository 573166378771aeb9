//! Which of the runtime's own stamps a CRD's Katalog reads: `.health` and `.metrics`, as a
//! template field (`{{ .health.state }}`) or a condition path (`field: metrics.errorRatePercent`).
//! The runtime writes a stamp onto every CR only when something reads it, so a Katalog that
//! never looks costs no write when the CRD's health moves. And which fields of the CR's own
//! `.status` it reads (a state machine): a status write that changes one of them is the
//! next step's trigger, one that changes only fields nobody reads is not.
//!
//! A textual scan of every string value: it may see a reference where there is none (a probe
//! path `/health`), which only costs a stamp; it does not miss the ways Katalogs read them.
//! A cross read's `.cross.<as>.health` is another CRD's, served live, and does not count.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::yaml::{Node, NodeValue};

/// The stamps a CRD's Katalog reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StampReads {
    pub health: bool,
    pub metrics: bool,
    /// The top-level fields of the CR's own status it reads (not a stamp); [`WHOLE_STATUS`]
    /// when it reads the status whole.
    pub status: BTreeSet<String>,
}

/// Stands for the whole status in [`StampReads::status`] (`{{ toJSON .status }}`).
pub const WHOLE_STATUS: &str = "*";

impl StampReads {
    /// Whether a stamp is read.
    pub fn any(&self) -> bool {
        self.health || self.metrics
    }

    pub fn or(mut self, other: StampReads) -> StampReads {
        self.health |= other.health;
        self.metrics |= other.metrics;
        self.status.extend(other.status);
        self
    }
}

/// `health`, `metrics` or `status` at the root of a field chain: not after a word or
/// another field; for `status`, the field read under it.
static ROOT_READ: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^\w.])\.?(health|metrics|status)(?:\.([\w-]+))?(?:[.\s})|\[]|$)").expect("a valid pattern")
});

/// What `text` reads.
pub fn in_text(text: &str) -> StampReads {
    let mut reads = StampReads::default();
    for found in ROOT_READ.captures_iter(text) {
        match &found[1] {
            "health" => reads.health = true,
            "metrics" => reads.metrics = true,
            _ => {
                let field = found.get(2).map_or(WHOLE_STATUS, |f| f.as_str());
                reads.status.insert(field.to_string());
            }
        }
    }
    reads
}

/// What the string values under `node` read.
pub(super) fn in_node(node: &Node) -> StampReads {
    match &node.value {
        NodeValue::String(text) => in_text(text),
        NodeValue::Seq(items) => items.iter().fold(StampReads::default(), |r, n| r.or(in_node(n))),
        NodeValue::Map(entries) => entries
            .iter()
            .fold(StampReads::default(), |r, (_, value)| r.or(in_node(value))),
        _ => StampReads::default(),
    }
}

/// Whether `next` changes a field of `before` (a status) that `reads` names.
pub fn changes_what_it_reads(reads: &BTreeSet<String>, before: &serde_json::Value, next: &serde_json::Value) -> bool {
    match reads.contains(WHOLE_STATUS) {
        true => before != next,
        false => reads.iter().any(|field| before.get(field) != next.get(field)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_references_count_and_cross_reads_do_not() {
        assert_eq!(
            in_text("{{ if gt .health.consecutiveFails 3 }}x{{ end }}"),
            StampReads {
                health: true,
                metrics: false,
                status: BTreeSet::new(),
            }
        );
        assert!(in_text("metrics.errorRatePercent").metrics, "a condition field path");
        assert!(in_text("{{.metrics.queueDepth}}").metrics);
        assert!(
            !in_text("{{ .cross.db.health.state }}").any(),
            "another CRD's, served live"
        );
        assert!(!in_text("{{ .spec.healthCheck }}").any());
        assert!(!in_text("healthy").any(), "a dependsOn condition");
        assert!(!in_text("{{ .status.metricsEndpoint }}").any());
        let fields = |text: &str| in_text(text).status.into_iter().collect::<Vec<_>>();
        assert_eq!(
            fields("{{ .status.metricsEndpoint }}"),
            ["metricsEndpoint"],
            "its own status"
        );
        assert_eq!(fields("status.phase"), ["phase"], "a condition field path");
        assert_eq!(fields("{{ index .status.conditions 0 }}"), ["conditions"]);
        assert_eq!(fields("{{ toJSON .status }}"), [WHOLE_STATUS], "read whole");
        assert!(fields("{{ .cross.db.status.phase }}").is_empty(), "another CR's");
        assert!(fields("{{ .children.job.status.succeeded }}").is_empty(), "a child's");
    }

    #[test]
    fn only_a_change_to_a_field_read_counts() {
        let reads: BTreeSet<String> = ["phase".to_string()].into();
        let before = serde_json::json!({"phase": "Pending", "at": "1"});
        let next = |phase: &str, at: &str| serde_json::json!({"phase": phase, "at": at});
        assert!(changes_what_it_reads(&reads, &before, &next("Running", "1")));
        assert!(
            !changes_what_it_reads(&reads, &before, &next("Pending", "2")),
            "a timestamp nobody reads"
        );
        assert!(
            changes_what_it_reads(&reads, &serde_json::Value::Null, &next("Pending", "1")),
            "a first status"
        );
        let whole: BTreeSet<String> = [WHOLE_STATUS.to_string()].into();
        assert!(changes_what_it_reads(&whole, &before, &next("Pending", "2")));
    }
}
