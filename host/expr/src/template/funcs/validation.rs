//! Shape checks for admission rules: is this text a valid name, label, email, URL, port,
//! image reference, git repository or JSON. Each answers a boolean and never fails: a rule
//! reads `false` for anything that is not text (or a number) of that shape.

use serde_json::Value;

use super::args::{Result, exactly, text};
use super::entry::Entry;
use crate::names::{is_dns1123_subdomain, is_label_key, is_label_value};
use crate::template::env::Env;

macro_rules! check {
    ($name:literal, $test:expr, $doc:literal) => {
        Entry {
            name: $name,
            func: |_: &Env<'_>, args: &[&Value]| -> Result {
                exactly(args, 1)?;
                let test: fn(&str) -> bool = $test;
                // Text, or a number a CR holds as one (a port); never a map, a list or nil.
                let scalar = matches!(args[0], Value::String(_) | Value::Number(_));
                Ok(Value::Bool(scalar && test(&text(args, 0))))
            },
            usage: concat!($name, " TEXT"),
            doc: $doc,
        }
    };
}

pub const FUNCS: &[Entry] = &[
    check!(
        "isDNS1123Subdomain",
        is_dns1123_subdomain,
        "TEXT is a DNS-1123 subdomain (what most object names must be)"
    ),
    check!("isValidLabelKey", is_label_key, "TEXT is a label key: [prefix/]name"),
    check!(
        "isValidAnnotationKey",
        is_label_key,
        "TEXT is an annotation key (the label key format)"
    ),
    check!(
        "isValidLabelValue",
        is_label_value,
        "TEXT is a label value (empty is valid)"
    ),
    check!(
        "isValidEmail",
        is_email,
        "TEXT is one bare email address (user@host.tld)"
    ),
    check!("isValidURL", is_url, "TEXT is an absolute http(s) URL with a host"),
    check!(
        "isValidPort",
        |t| t.trim().parse::<u16>().is_ok_and(|p| p > 0),
        "TEXT is a port number, 1 to 65535"
    ),
    check!(
        "isValidJSON",
        |t| serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok(),
        "TEXT parses as JSON"
    ),
    check!(
        "isValidImageRef",
        is_image_ref,
        "TEXT is a container image reference: [registry[:port]/]path[:tag][@digest]"
    ),
    check!(
        "isValidGitRepository",
        is_git_repository,
        "TEXT looks like a git repository: https://, git://, ssh:// or git@host:org/repo"
    ),
];

fn is_host(host: &str) -> bool {
    let host = host
        .rsplit_once(':')
        .map_or(host, |(h, port)| match port.parse::<u16>() {
            Ok(_) => h,
            Err(_) => "",
        });
    !host.is_empty()
        && host.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

fn is_email(t: &str) -> bool {
    let Some((user, domain)) = t.split_once('@') else {
        return false;
    };
    !user.is_empty()
        && !user.contains(|c: char| c.is_whitespace() || "<>(),;:\"[]@".contains(c))
        && domain.contains('.')
        && is_host(domain)
}

fn is_url(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("https://").or_else(|| t.strip_prefix("http://")) else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    !t.contains(char::is_whitespace) && is_host(host)
}

fn is_image_ref(t: &str) -> bool {
    let (rest, digest) = t.split_once('@').map_or((t, None), |(r, d)| (r, Some(d)));
    if digest.is_some_and(|d| {
        let Some((algorithm, hex)) = d.split_once(':') else {
            return true;
        };
        algorithm.is_empty() || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit())
    }) {
        return false;
    }
    // A tag follows the last colon after the last slash (a colon before it is a port).
    let slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (path, tag) = match rest[slash..].rsplit_once(':') {
        Some((_, tag)) => (&rest[..rest.len() - tag.len() - 1], Some(tag)),
        None => (rest, None),
    };
    let tag_ok = tag.is_none_or(|tag| {
        !tag.is_empty()
            && tag.len() <= 128
            && tag.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
            && !tag.starts_with(['.', '-'])
    });
    let mut parts: Vec<&str> = path.split('/').collect();
    // A first part with a dot, a colon or `localhost` names a registry.
    if parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost") {
        if !is_host(parts[0]) {
            return false;
        }
        parts.remove(0);
    }
    let component = |p: &&str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            && p.starts_with(|c: char| c.is_ascii_alphanumeric())
            && p.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    tag_ok && !parts.is_empty() && parts.iter().all(component)
}

fn is_git_repository(t: &str) -> bool {
    if t.contains(char::is_whitespace) {
        return false;
    }
    for scheme in ["https://", "http://", "git://", "ssh://"] {
        if let Some(rest) = t.strip_prefix(scheme) {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            return is_host(host) && !path.trim_matches('/').is_empty();
        }
    }
    // The scp-like shorthand: user@host:org/repo(.git).
    match t.split_once(':') {
        Some((user_host, path)) => {
            let host = user_host.rsplit_once('@').map_or(user_host, |(_, h)| h);
            user_host.contains('@') && is_host(host) && path.contains('/') && !path.starts_with('/')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_check_accepts_its_shape_and_refuses_near_misses() {
        assert!(is_email("team@myorg.io") && !is_email("Team <team@myorg.io>") && !is_email("nobody"));
        assert!(is_url("https://example.com/hook?x=1") && !is_url("ftp://example.com") && !is_url("https://"));
        assert!(is_image_ref("myorg/app:v1.2.3") && is_image_ref("registry.myorg.io:5000/team/app:latest"));
        assert!(is_image_ref("nginx") && is_image_ref(&format!("nginx@sha256:{}", "a".repeat(64))));
        assert!(!is_image_ref("MyOrg/App") && !is_image_ref("app:") && !is_image_ref("a b"));
        assert!(
            is_git_repository("https://github.com/myorg/payments")
                && is_git_repository("git@github.com:myorg/payments.git")
        );
        assert!(!is_git_repository("not a repo") && !is_git_repository("https://github.com"));
        assert!(is_label_key("platform.myorg.io/tier") && !is_label_key("bad key") && !is_label_key("a/"));
        assert!(is_label_value("") && is_label_value("team-payments") && !is_label_value("-leading"));
    }
}
