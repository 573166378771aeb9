//! Which of the runtime's own stamps a CRD's Katalog reads: `.health` and `.metrics`, as a
//! template field (`{{ .health.state }}`) or a condition path (`field: metrics.errorRatePercent`).
//! The runtime writes a stamp onto every CR only when something reads it, so a Katalog that
//! never looks costs no write when the CRD's health moves. And whether it reads the CR's own
//! `.status` (a state machine), whose next step then follows a status write at once.
//!
//! A textual scan of every string value: it may see a reference where there is none (a probe
//! path `/health`), which only costs a stamp; it does not miss the ways Katalogs read them.
//! A cross read's `.cross.<as>.health` is another CRD's, served live, and does not count.

use std::sync::LazyLock;

use regex::Regex;

use super::yaml::{Node, NodeValue};

/// The stamps a CRD's Katalog reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StampReads {
    pub health: bool,
    pub metrics: bool,
    /// The CR's own status (not a stamp).
    pub status: bool,
}

impl StampReads {
    /// Whether a stamp is read.
    pub fn any(self) -> bool {
        self.health || self.metrics
    }

    pub fn or(self, other: StampReads) -> StampReads {
        StampReads {
            health: self.health || other.health,
            metrics: self.metrics || other.metrics,
            status: self.status || other.status,
        }
    }
}

/// `health`, `metrics` or `status` at the root of a field chain: not after a word or
/// another field.
static ROOT_READ: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|[^\w.])\.?(health|metrics|status)(?:[.\s})|]|$)").expect("a valid pattern"));

/// What `text` reads.
pub fn in_text(text: &str) -> StampReads {
    let mut reads = StampReads::default();
    for found in ROOT_READ.captures_iter(text) {
        match &found[1] {
            "health" => reads.health = true,
            "metrics" => reads.metrics = true,
            _ => reads.status = true,
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
                status: false,
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
        assert!(in_text("{{ .status.metricsEndpoint }}").status, "its own status");
        assert!(in_text("status.phase").status, "a condition field path");
        assert!(!in_text("{{ .cross.db.status.phase }}").status, "another CR's");
        assert!(!in_text("{{ .children.job.status.succeeded }}").status, "a child's");
    }
}
