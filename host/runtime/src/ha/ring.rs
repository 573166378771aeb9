//! Which member of a shard ring owns a key: rendezvous (highest random weight) hashing, so a
//! member joining or leaving moves only the keys it gains or held. The hash is SHA-256 and
//! not the standard library's, whose output may differ between Rust releases: two replicas
//! of different builds must agree on every owner.

use sha2::{Digest, Sha256};

/// The members one replica believes are live, sorted: what it publishes on its member Lease.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ring(Vec<String>);

impl Ring {
    pub fn new(members: impl IntoIterator<Item = String>) -> Self {
        let mut members: Vec<String> = members.into_iter().filter(|m| !m.is_empty()).collect();
        members.sort();
        members.dedup();
        Self(members)
    }

    /// The form kept in a Lease annotation (identities hold no comma: see `identity`).
    pub fn parse(text: &str) -> Self {
        Self::new(text.split(',').map(|m| m.trim().to_string()))
    }

    pub fn encode(&self) -> String {
        self.0.join(",")
    }

    pub fn members(&self) -> &[String] {
        &self.0
    }

    /// The member that owns `key`, or `None` for an empty ring.
    pub fn owner(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .max_by_key(|member| weight(member, key))
            .map(String::as_str)
    }
}

fn weight(member: &str, key: &str) -> u64 {
    let mut hash = Sha256::new();
    hash.update(member.as_bytes());
    hash.update([0]);
    hash.update(key.as_bytes());
    let digest = hash.finalize();
    u64::from_be_bytes(digest[..8].try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(members: &[&str]) -> Ring {
        Ring::new(members.iter().map(|m| m.to_string()))
    }

    #[test]
    fn every_key_has_one_owner_and_shares_are_even() {
        let three = ring(&["a", "b", "c"]);
        let mut counts = std::collections::BTreeMap::new();
        for i in 0..3000 {
            *counts.entry(three.owner(&format!("ns/cr-{i}")).unwrap()).or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 3);
        for (member, count) in counts {
            assert!((800..1200).contains(&count), "{member} owns {count} of 3000");
        }
        assert_eq!(ring(&[]).owner("k"), None);
    }

    #[test]
    fn a_member_joining_takes_keys_only_for_itself() {
        let before = ring(&["a", "b", "c"]);
        let after = ring(&["a", "b", "c", "d"]);
        let mut moved = 0;
        for i in 0..2000 {
            let key = format!("ns/cr-{i}");
            let (old, new) = (before.owner(&key).unwrap(), after.owner(&key).unwrap());
            if old != new {
                assert_eq!(new, "d", "{key} moved from {old} to {new}, not to the new member");
                moved += 1;
            }
        }
        assert!(
            (300..700).contains(&moved),
            "{moved} of 2000 keys moved to the fourth member"
        );
    }

    #[test]
    fn the_annotation_form_round_trips_in_any_order() {
        let parsed = Ring::parse("c, a,b,,a");
        assert_eq!(parsed, ring(&["a", "b", "c"]));
        assert_eq!(Ring::parse(&parsed.encode()), parsed);
    }
}
