//! Which of the runtime's own stamps a CRD's Katalog reads: `.health` and `.metrics`, as a
//! template field (`{{ .health.state }}`) or a condition path (`field: metrics.errorRatePercent`).
//! The runtime writes a stamp onto every CR only when something reads it, so a Katalog that
//! never looks costs no write when the CRD's health moves. And which fields of the CR's own
//! `.status` it reads (a state machine): a status write that changes one of them is the
//! next step's trigger, one that changes only fields nobody reads is not. And which kinds
//! of its children it reads (`.children.job`): those are looked up among the CR's observed
//! children when a run applies none of that kind (a step whose Job was made before).
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
    /// The top-level fields of the CR's own status it reads (not a stamp); [`WHOLE`]
    /// when it reads the status whole.
    pub status: BTreeSet<String>,
    /// The lowercase kinds of `.children` it reads; [`WHOLE`] when it reads them whole.
    pub children: BTreeSet<String>,
}

/// Stands for the whole status or all children in [`StampReads`] (`{{ toJSON .status }}`).
pub const WHOLE: &str = "*";

impl StampReads {
    /// Whether a stamp is read.
    pub fn any(&self) -> bool {
        self.health || self.metrics
    }

    pub fn or(mut self, other: StampReads) -> StampReads {
        self.health |= other.health;
        self.metrics |= other.metrics;
        self.status.extend(other.status);
        self.children.extend(other.children);
        self
    }
}

// Word characters are ASCII's: Unicode's `\w` made these two patterns take 170 KB for as
// long as the runtime runs. A field named outside ASCII then reads as the whole status or
// all children, which only makes more writes count as changes.

/// `health`, `metrics` or `status` at the root of a field chain: not after a word or
/// another field; for `status`, the field read under it.
static ROOT_READ: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^A-Za-z0-9_.])\.?(health|metrics|status)(?:\.([A-Za-z0-9_-]+))?(?:[.\s})|\[]|$)")
        .expect("a valid pattern")
});

/// `.children` at the root of a field chain, and the kind read under it.
static CHILDREN_READ: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^A-Za-z0-9_.])\.?children(?:\.([A-Za-z0-9_-]+))?(?:[.\s})|\[]|$)").expect("a valid pattern")
});

/// What `text` reads.
pub fn in_text(text: &str) -> StampReads {
    let mut reads = StampReads::default();
    for found in CHILDREN_READ.captures_iter(text) {
        let kind = found.get(1).map_or(WHOLE, |k| k.as_str());
        reads.children.insert(kind.to_lowercase());
    }
    for found in ROOT_READ.captures_iter(text) {
        match &found[1] {
            "health" => reads.health = true,
            "metrics" => reads.metrics = true,
            _ => {
                let field = found.get(2).map_or(WHOLE, |f| f.as_str());
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
    match reads.contains(WHOLE) {
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
                ..StampReads::default()
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
        assert_eq!(fields("{{ toJSON .status }}"), [WHOLE], "read whole");
        assert!(fields("{{ .cross.db.status.phase }}").is_empty(), "another CR's");
        assert!(fields("{{ .children.job.status.succeeded }}").is_empty(), "a child's");
        assert_eq!(
            fields("{{ .status.größe }}"),
            [WHOLE],
            "a field outside ASCII: the whole status"
        );
    }

    #[test]
    fn the_kinds_of_children_read_are_named() {
        let kinds = |text: &str| in_text(text).children.into_iter().collect::<Vec<_>>();
        assert_eq!(
            kinds("children.job.status.succeeded"),
            ["job"],
            "a condition field path"
        );
        assert_eq!(kinds("{{ get .children.deployment \"status\" }}"), ["deployment"]);
        assert_eq!(kinds("{{ toJSON .children }}"), [WHOLE], "read whole");
        assert!(kinds("{{ .spec.children.job }}").is_empty(), "a field of the spec");
        assert!(kinds("{{ .cross.db.children.job }}").is_empty(), "another CR's");
        assert!(kinds("childrenReady").is_empty(), "a dependsOn condition");
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
        let whole: BTreeSet<String> = [WHOLE.to_string()].into();
        assert!(changes_what_it_reads(&whole, &before, &next("Pending", "2")));
    }
}
