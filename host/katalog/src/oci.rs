//! `oci://HOST[:PORT]/REPOSITORY[:TAG]@sha256:HEX`: a component kept in an OCI registry.
//!
//! The digest is required and is what the host trusts: it names the artifact manifest, whose
//! layer digest in turn names the component's bytes. A tag only says which version a human
//! meant; it is never resolved.

/// A text that is not an `oci://` reference (or not pinned where a pin is required): what is
/// wrong, naming the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidReference(String);

/// A registry reference, pinned to a manifest digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OciReference {
    /// `host[:port]`, as the registry is reached and as credentials are looked up.
    pub registry: String,
    pub repository: String,
    pub tag: Option<String>,
    /// Lowercase hex sha256 of the manifest.
    pub digest: String,
}

impl std::fmt::Display for OciReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        write!(f, "@sha256:{}", self.digest)
    }
}

impl OciReference {
    /// Parses a whole `oci://` reference; a digest is required unless `pinned` is false
    /// (`ork component push` is given a tag, and prints the digest it got).
    pub fn parse(text: &str, pinned: bool) -> Result<Self, InvalidReference> {
        let Some(rest) = text.trim().strip_prefix("oci://") else {
            return Err(InvalidReference(format!("{text:?} does not start with oci://")));
        };
        let (name, digest) = match rest.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (rest, None),
        };
        let digest = match digest {
            Some(digest) => {
                let hex = digest
                    .strip_prefix("sha256:")
                    .ok_or_else(|| InvalidReference(format!("{text}: the digest {digest:?} is not sha256:HEX")))?;
                if !is_sha256_hex(hex) {
                    return Err(InvalidReference(format!(
                        "{text}: the digest is not 64 lowercase hex digits"
                    )));
                }
                hex.to_string()
            }
            None if pinned => {
                return Err(InvalidReference(format!(
                    "{text}: pin the manifest digest (oci://HOST/REPO:TAG@sha256:...); a tag alone can \
                     change under the host"
                )));
            }
            None => String::new(),
        };
        let Some((registry, path)) = name.split_once('/') else {
            return Err(InvalidReference(format!(
                "{text}: give the registry host and a repository (oci://HOST/REPO)"
            )));
        };
        if !is_registry(registry) {
            return Err(InvalidReference(format!(
                "{text}: {registry:?} is not a registry host (HOST or HOST:PORT, like ghcr.io or 127.0.0.1:5000)"
            )));
        }
        // The tag follows the last ':' after the last '/': a port belongs to the host.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag)),
            _ => (path, None),
        };
        if !is_repository(repository) {
            return Err(InvalidReference(format!(
                "{text}: {repository:?} is not a repository name (lowercase letters, digits, and . _ - \
                 between them, in /-separated parts)"
            )));
        }
        if let Some(tag) = tag
            && !is_tag(tag)
        {
            return Err(InvalidReference(format!(
                "{text}: {tag:?} is not a tag (up to 128 letters, digits, _ . -; not starting with . or -)"
            )));
        }
        Ok(Self {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(String::from),
            digest,
        })
    }
}

/// Whether `hex` is a sha256 as digests write it: 64 lowercase hex digits.
pub fn is_sha256_hex(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn is_registry(host: &str) -> bool {
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    // A bare name would be read by other tools as a Docker Hub namespace: only localhost is.
    let qualified = name.contains('.') || port.is_some() || name == "localhost";
    port_ok && qualified && name.len() <= 253 && name.split('.').all(label)
}

fn is_repository(path: &str) -> bool {
    let component = |part: &str| {
        let bytes = part.as_bytes();
        !bytes.is_empty()
            && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
    };
    path.len() <= 255 && path.split('/').all(component)
}

fn is_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_pinned_reference_parses_and_prints_back() {
        let text = format!("oci://127.0.0.1:5000/team/hooks/notes:v1.2@sha256:{DIGEST}");
        let reference = OciReference::parse(&text, true).unwrap();
        assert_eq!(reference.registry, "127.0.0.1:5000");
        assert_eq!(reference.repository, "team/hooks/notes");
        assert_eq!(reference.tag.as_deref(), Some("v1.2"));
        assert_eq!(reference.digest, DIGEST);
        assert_eq!(reference.to_string(), text);
        let untagged = OciReference::parse(&format!("oci://ghcr.io/acme/hook@sha256:{DIGEST}"), true).unwrap();
        assert_eq!((untagged.repository.as_str(), untagged.tag), ("acme/hook", None));
    }

    #[test]
    fn a_tag_without_a_digest_is_refused_where_the_host_pulls() {
        let error = OciReference::parse("oci://ghcr.io/acme/hook:v1", true).unwrap_err();
        assert!(error.to_string().contains("pin the manifest digest"), "{error}");
        let unpinned = OciReference::parse("oci://ghcr.io/acme/hook:v1", false).unwrap();
        assert_eq!(unpinned.tag.as_deref(), Some("v1"));
    }

    #[test]
    fn malformed_references_name_what_is_wrong() {
        for (text, says) in [
            (format!("oci://hooks/notes@sha256:{DIGEST}"), "not a registry host"),
            (
                format!("oci://ghcr.io@sha256:{DIGEST}"),
                "registry host and a repository",
            ),
            (
                format!("oci://ghcr.io/Acme/hook@sha256:{DIGEST}"),
                "not a repository name",
            ),
            (
                format!("oci://ghcr.io/acme//hook@sha256:{DIGEST}"),
                "not a repository name",
            ),
            (format!("oci://ghcr.io/acme/hook:-v1@sha256:{DIGEST}"), "not a tag"),
            ("oci://ghcr.io/acme/hook@sha256:abc".to_string(), "64 lowercase hex"),
            (format!("oci://ghcr.io/acme/hook@md5:{DIGEST}"), "not sha256:HEX"),
            (
                format!("oci://ghcr.io:99999x/acme/hook@sha256:{DIGEST}"),
                "not a registry host",
            ),
        ] {
            let error = OciReference::parse(&text, true).unwrap_err();
            assert!(error.to_string().contains(says), "{text}: {error}");
        }
    }
}
