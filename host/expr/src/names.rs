//! Kubernetes' rules for the names that end up in an API path: namespaces are DNS-1123
//! labels, most objects DNS-1123 subdomains, and every name a single path segment. Whatever
//! a tenant supplies (a CR's field rendered into a child's name, a guest's kube call, a
//! Serve API path) is checked here before it can reach a URL, where `?`, `#` or `/` would
//! turn a read of one object into a list, a watch or a delete of many.

use crate::error::Error;

/// The longest object name Kubernetes stores (a DNS-1123 subdomain).
pub const NAME_LIMIT: usize = 253;

/// True for a DNS-1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn is_dns1123_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// A DNS-1123 subdomain: what most Kubernetes object names must be.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= NAME_LIMIT && s.split('.').all(is_dns1123_label)
}

/// A label value: empty, or at most 63 of `[A-Za-z0-9-_.]` starting and ending with an
/// alphanumeric.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// A label (or annotation) key: `[prefix/]name`, the name a non-empty label value, the
/// prefix a DNS-1123 subdomain.
pub fn is_label_key(key: &str) -> bool {
    let (prefix, name) = key.rsplit_once('/').map_or((None, key), |(p, n)| (Some(p), n));
    !name.is_empty() && is_label_value(name) && prefix.is_none_or(is_dns1123_subdomain)
}

/// Why `namespace` cannot be a namespace, if it cannot.
pub fn check_namespace(namespace: &str) -> Result<(), Error> {
    match is_dns1123_label(namespace) {
        true => Ok(()),
        false => Err(Error::Namespace(crate::text::bounded(namespace.to_string(), 80))),
    }
}

/// Why `name` cannot name an object, if it cannot: the rule every kind shares (a path
/// segment: not empty, not `.` or `..`, no `/` or `%`), no control characters or spaces,
/// at most [`NAME_LIMIT`] bytes. Kinds with stricter rules (most: DNS-1123 subdomains) are
/// held to them by the API server; a name that passes here is safe in a URL once encoded.
pub fn check_name(name: &str) -> Result<(), Error> {
    let why = if name.is_empty() {
        "is empty"
    } else if name.len() > NAME_LIMIT {
        "is longer than 253 bytes"
    } else if name == "." || name == ".." {
        "may not be '.' or '..'"
    } else if name.contains(['/', '%']) {
        "may not contain '/' or '%'"
    } else if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        "may not contain spaces or control characters"
    } else {
        return Ok(());
    };
    Err(Error::Name {
        name: crate::text::bounded(name.to_string(), 80),
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains_follow_kubernetes() {
        for ok in ["a", "web-1", "0ab"] {
            assert!(is_dns1123_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", &"x".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
        assert!(is_dns1123_subdomain("web.example.com"));
        assert!(!is_dns1123_subdomain("web..example"));
        assert!(!is_dns1123_subdomain(&"a.".repeat(127)));
    }

    #[test]
    fn a_name_that_would_change_the_url_is_refused_with_the_reason() {
        for (bad, reason) in [
            ("", "is empty"),
            ("..", "'.' or '..'"),
            ("a/b", "'/' or '%'"),
            ("%3Fwatch%3Dtrue", "'/' or '%'"),
            ("a b", "spaces"),
            ("a\nb", "control"),
        ] {
            let error = check_name(bad).unwrap_err();
            assert!(error.to_string().contains(reason), "{bad:?}: {error}");
        }
        assert!(check_name(&"x".repeat(254)).unwrap_err().to_string().contains("253"));
        // Other kinds (RBAC roles) allow more than a subdomain; the encoding makes them safe.
        for ok in ["web", "system:controller:x", "?watch=true", "a#b"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        assert!(check_namespace("team-a").is_ok());
        assert!(
            check_namespace("?watch=1")
                .unwrap_err()
                .to_string()
                .contains("DNS-1123 label")
        );
    }
}
