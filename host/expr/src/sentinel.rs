//! Sentinels: facts about an update event computed from the old and new object (which
//! metadata changed), carried with the event to the gates. Only declared sentinels are
//! computed.

use serde_json::Value;

/// The sentinel names, in bit order.
pub const NAMES: [&str; 14] = [
    "generationChanged",
    "labelsChanged",
    "annotationsChanged",
    "deletionStarted",
    "finalizersChanged",
    "nameChanged",
    "namespaceChanged",
    "generateNameChanged",
    "uidChanged",
    "resourceVersionChanged",
    "creationTimestampChanged",
    "deletionGracePeriodSecondsChanged",
    "ownerReferenceChanged",
    "managedFieldsChanged",
];

/// The bit of `managedFieldsChanged`: caches keep `managedFields` only where it is declared.
pub const MANAGED_FIELDS_CHANGED: usize = 13;

/// The metadata field each sentinel compares (deletionStarted is special).
const FIELDS: [&str; 14] = [
    "generation",
    "labels",
    "annotations",
    "deletionTimestamp",
    "finalizers",
    "name",
    "namespace",
    "generateName",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
    "managedFields",
];

/// The index of a sentinel name.
pub fn index(name: &str) -> Option<usize> {
    NAMES.iter().position(|n| *n == name)
}

/// A set of sentinels (the declared ones), as a bit mask.
pub fn mask<'a>(names: impl IntoIterator<Item = &'a str>) -> u16 {
    names.into_iter().filter_map(index).fold(0, |m, i| m | (1 << i))
}

/// Which sentinels are true for the event being evaluated (bit `i` = sentinel `i` of
/// [`NAMES`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SentinelBits(pub u16);

impl SentinelBits {
    pub fn is_set(self, index: usize) -> bool {
        index < 16 && self.0 & (1 << index) != 0
    }

    /// The sentinels set, by name (`{"generationChanged": true}`): how a run's context carries
    /// them from the gates to every later stage, which reads them back with [`Self::of_named`].
    pub fn named(self) -> Value {
        let set = NAMES.iter().enumerate().filter(|(i, _)| self.is_set(*i));
        Value::Object(set.map(|(_, name)| (name.to_string(), Value::Bool(true))).collect())
    }

    /// The sentinels a [`Self::named`] map holds as `true` (unknown names are ignored).
    pub fn of_named(named: &Value) -> SentinelBits {
        let set = named.as_object().into_iter().flatten();
        let bits = set
            .filter(|(_, value)| value.as_bool() == Some(true))
            .filter_map(|(name, _)| index(name))
            .fold(0, |bits, i| bits | (1 << i));
        SentinelBits(bits)
    }
}

/// Computes the sentinels in `declared` for an update from `old` to `new`. Without an old
/// object (a create, a resync, a secondary watch) every sentinel is false.
pub fn compute(old: Option<&Value>, new: &Value, declared: u16) -> SentinelBits {
    // A new object changed from nothing: its generation, name, uid... all "changed", so a
    // gate on generationChanged lets creations through (and a restart's first list).
    let nothing = Value::Null;
    let old = old.map_or(&nothing, |o| &o["metadata"]);
    let new = &new["metadata"];
    let mut bits = 0u16;
    for (i, field) in FIELDS.iter().enumerate() {
        if declared & (1 << i) == 0 {
            continue;
        }
        let fired = if NAMES[i] == "deletionStarted" {
            old[field].is_null() && !new[field].is_null()
        } else {
            !same(&old[field], &new[field])
        };
        if fired {
            bits |= 1 << i;
        }
    }
    SentinelBits(bits)
}

/// Absent and empty collections count as the same (an object gaining `labels: {}` changed
/// nothing a user would call a label change).
fn same(a: &Value, b: &Value) -> bool {
    let empty = |v: &Value| {
        v.is_null() || v.as_object().is_some_and(|o| o.is_empty()) || v.as_array().is_some_and(|a| a.is_empty())
    };
    (empty(a) && empty(b)) || a == b
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_managed_fields_bit_names_its_sentinel() {
        assert_eq!(NAMES[MANAGED_FIELDS_CHANGED], "managedFieldsChanged");
    }

    #[test]
    fn sentinels_by_name_carry_exactly_the_set_ones() {
        let bits = SentinelBits(mask(["generationChanged", "labelsChanged"]));
        let named = bits.named();
        assert_eq!(named, json!({"generationChanged": true, "labelsChanged": true}));
        assert_eq!(SentinelBits::of_named(&named), bits);
        let written = json!({"generationChanged": false, "labelsChanged": true, "noSuch": true});
        assert_eq!(SentinelBits::of_named(&written), SentinelBits(mask(["labelsChanged"])));
        assert_eq!(
            SentinelBits::of_named(&json!("generationChanged")),
            SentinelBits::default()
        );
    }

    use serde_json::json;

    use super::*;

    const ALL: u16 = (1 << 14) - 1;

    fn names(bits: SentinelBits) -> Vec<&'static str> {
        NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| bits.is_set(*i))
            .map(|(_, n)| *n)
            .collect()
    }

    #[test]
    fn a_spec_edit_changes_generation_and_resource_version_only() {
        let old = json!({"metadata": {"name": "a", "generation": 1, "resourceVersion": "10", "labels": {"x": "1"}}});
        let new = json!({"metadata": {"name": "a", "generation": 2, "resourceVersion": "11", "labels": {"x": "1"}}});
        assert_eq!(
            names(compute(Some(&old), &new, ALL)),
            ["generationChanged", "resourceVersionChanged"]
        );
    }

    #[test]
    fn each_sentinel_fires_on_its_own_field() {
        let base = json!({"metadata": {"name": "a", "namespace": "n", "uid": "u", "generation": 1}});
        for (i, field) in FIELDS.iter().enumerate() {
            let mut new = base.clone();
            new["metadata"][field] = json!("changed");
            let bits = compute(Some(&base), &new, ALL);
            assert_eq!(names(bits), [NAMES[i]], "changing metadata.{field}");
        }
    }

    #[test]
    fn deletion_started_fires_only_when_the_timestamp_appears() {
        let alive = json!({"metadata": {"name": "a"}});
        let dying = json!({"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z"}});
        let mask = mask(["deletionStarted"]);
        assert!(compute(Some(&alive), &dying, mask).is_set(3));
        assert!(!compute(Some(&dying), &dying, mask).is_set(3));
    }

    #[test]
    fn only_declared_sentinels_are_computed_and_a_create_changes_what_it_sets() {
        let old = json!({"metadata": {"generation": 1, "labels": {"a": "1"}}});
        let new = json!({"metadata": {"generation": 2, "labels": {"a": "2"}}});
        assert_eq!(
            names(compute(Some(&old), &new, mask(["labelsChanged"]))),
            ["labelsChanged"]
        );
        let created = names(compute(
            None,
            &new,
            mask(["generationChanged", "labelsChanged", "deletionStarted", "uidChanged"]),
        ));
        assert_eq!(
            created,
            ["generationChanged", "labelsChanged"],
            "no uid set, not being deleted"
        );
        assert_eq!(
            compute(
                Some(&json!({"metadata": {}})),
                &json!({"metadata": {"labels": {}}}),
                ALL
            ),
            SentinelBits::default()
        );
    }
}
