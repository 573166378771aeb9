//! Text helpers: bounding text that crosses a trust boundary (guest messages, names from the
//! cluster) before it lands in a log line, a condition or an event, and the nearest valid
//! name for a "did you mean" hint.

/// The longest prefix of `text` of at most `limit` bytes that ends on a character boundary.
pub fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` cut to at most `limit` bytes (at least 3), marked with "..." where it was cut.
pub fn bounded(mut text: String, limit: usize) -> String {
    if text.len() > limit {
        let keep = cut(&text, limit.saturating_sub(3)).len();
        text.truncate(keep);
        text.push_str("...");
    }
    text
}

/// The valid key nearest to `key` by edit distance (case-insensitive).
pub fn closest<'a>(key: &str, fields: &[&'a str]) -> Option<&'a str> {
    let lower = key.to_lowercase();
    fields
        .iter()
        .copied()
        .min_by_key(|f| strsim::levenshtein(&lower, &f.to_lowercase()))
}

/// The field `key` is probably a misspelling of: the closest, only when it is near (at most
/// a third of the key's letters differ, and at least two may), else none; "closest" alone
/// suggests `apiVersion` for `admission`.
pub fn misspelt<'a>(key: &str, fields: &[&'a str]) -> Option<&'a str> {
    let lower = key.to_lowercase();
    let best = closest(key, fields)?;
    let distance = strsim::levenshtein(&lower, &best.to_lowercase());
    (distance <= (lower.chars().count() / 3).max(2)).then_some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelling_is_near_and_a_stranger_is_not() {
        let fields = ["apiVersion", "kind", "metadata", "spec", "resources"];
        assert_eq!(misspelt("resouces", &fields), Some("resources"));
        assert_eq!(misspelt("Kind", &fields), Some("kind"));
        assert_eq!(misspelt("admission", &fields), None);
        assert_eq!(misspelt("queue", &["mode", "namespace"]), None);
    }

    #[test]
    fn cuts_fall_on_character_boundaries_and_are_marked() {
        assert_eq!(cut("héllo", 2), "h", "é is two bytes: not split");
        assert_eq!(cut("abc", 10), "abc");
        assert_eq!(bounded("abcdefgh".into(), 6), "abc...");
        assert_eq!(bounded("abc".into(), 6), "abc");
        assert!(bounded("é".repeat(100), 11).len() <= 11);
    }
}
