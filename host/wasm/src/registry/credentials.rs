//! Registry credentials in Docker's config format (`~/.docker/config.json`, or a
//! `kubernetes.io/dockerconfigjson` Secret): which entry applies to a registry, and what it
//! sends.
//!
//! They are read again for every pull, so rotated credentials apply without a restart, and
//! an entry is only ever sent to the registry it is keyed by.

use crate::error::Error;
use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

/// Where credentials come from, first match winning; plus the registries reached over plain
/// HTTP. Set by whoever runs the host, never by a Katalog.
#[derive(Debug, Clone, Default)]
pub struct Registries {
    /// Docker config files.
    pub config_files: Vec<PathBuf>,
    /// `kubernetes.io/dockerconfigjson` Secrets (`namespace`, `name`), read with the
    /// host's own identity.
    pub secrets: Vec<(String, String)>,
    /// `host[:port]` of registries without TLS (a registry on loopback, say).
    pub insecure: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

/// One source's text, with the name errors give it.
pub struct Found {
    pub origin: String,
    pub text: Vec<u8>,
}

/// The credentials for `registry` (`host[:port]`) among `sources`, in order; anonymous when
/// none names it. A source that names it but cannot be used is an error, not a fallback.
pub fn lookup(registry: &str, sources: &[Found]) -> Result<RegistryAuth, Error> {
    let wanted = normalize(registry);
    for source in sources {
        let config: DockerConfig = serde_json::from_slice(&source.text)
            .map_err(|e| Error::Registry(format!("{}: not a Docker config file: {e}", source.origin)))?;
        if let Some((_, entry)) = config.auths.iter().find(|(key, _)| normalize(key) == wanted) {
            return entry.auth(&source.origin, registry);
        }
        if config.cred_helpers.keys().any(|key| normalize(key) == wanted) {
            return Err(Error::Registry(format!(
                "{}: {registry} is served by a credential helper, which the host does not run; put \
                 the credentials under auths",
                source.origin
            )));
        }
    }
    Ok(RegistryAuth::Anonymous)
}

impl Entry {
    fn auth(&self, origin: &str, registry: &str) -> Result<RegistryAuth, Error> {
        let at = format!("{origin}: auths[{registry:?}]");
        if let Some(token) = self.registrytoken.as_deref().filter(|t| !t.is_empty()) {
            return Ok(RegistryAuth::Bearer(token.to_string()));
        }
        if let Some(encoded) = self.auth.as_deref().filter(|a| !a.is_empty()) {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|e| Error::Registry(format!("{at}.auth is not base64: {e}")))?;
            let text = String::from_utf8(decoded).map_err(|_| Error::Registry(format!("{at}.auth is not text")))?;
            let (user, password) = text
                .split_once(':')
                .ok_or_else(|| Error::Registry(format!("{at}.auth is not USER:PASSWORD in base64")))?;
            return Ok(RegistryAuth::Basic(user.to_string(), password.to_string()));
        }
        if let (Some(user), Some(password)) = (&self.username, &self.password) {
            return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
        }
        if self.identitytoken.is_some() {
            return Err(Error::Registry(format!(
                "{at}: identity tokens (OAuth refresh tokens) are not exchanged by the host; give \
                 auth, username and password, or registrytoken"
            )));
        }
        Err(Error::Registry(format!(
            "{at} has no auth, username and password, or registrytoken"
        )))
    }
}

/// A config key as a `host[:port]`: keys may carry a scheme and a path
/// (`https://index.docker.io/v1/`), and Docker Hub goes by several names.
fn normalize(key: &str) -> String {
    let key = key.trim();
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key.split('/').next().unwrap_or_default().to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "docker.io" => "docker.io".into(),
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(origin: &str, json: serde_json::Value) -> Found {
        Found {
            origin: origin.into(),
            text: serde_json::to_vec(&json).unwrap(),
        }
    }

    #[test]
    fn the_entry_keyed_by_the_registry_is_used_and_no_other() {
        let basic = base64::engine::general_purpose::STANDARD.encode("ada:s3cret");
        let sources = [
            source(
                "first",
                serde_json::json!({"auths": {"other.example:5000": {"auth": basic}}}),
            ),
            source(
                "second",
                serde_json::json!({"auths": {
                    "https://registry.example:5000/v2/": {"username": "bob", "password": "pw"},
                    "https://index.docker.io/v1/": {"registrytoken": "hub-token"},
                }}),
            ),
        ];
        assert_eq!(
            lookup("registry.example:5000", &sources).unwrap(),
            RegistryAuth::Basic("bob".into(), "pw".into())
        );
        assert_eq!(
            lookup("other.example:5000", &sources).unwrap(),
            RegistryAuth::Basic("ada".into(), "s3cret".into())
        );
        assert_eq!(
            lookup("docker.io", &sources).unwrap(),
            RegistryAuth::Bearer("hub-token".into())
        );
        // Same host, another port: another registry, so nothing is sent.
        assert_eq!(lookup("registry.example", &sources).unwrap(), RegistryAuth::Anonymous);
    }

    #[test]
    fn unusable_entries_are_errors_that_name_their_source() {
        let cases = [
            (
                serde_json::json!({"auths": {"r.example": {"auth": "%%%"}}}),
                "auth is not base64",
            ),
            (
                serde_json::json!({"auths": {"r.example": {"auth": base64::engine::general_purpose::STANDARD.encode("nocolon")}}}),
                "not USER:PASSWORD",
            ),
            (
                serde_json::json!({"auths": {"r.example": {"identitytoken": "t"}}}),
                "identity tokens",
            ),
            (serde_json::json!({"auths": {"r.example": {}}}), "has no auth"),
            (
                serde_json::json!({"credHelpers": {"r.example": "ecr-login"}}),
                "credential helper",
            ),
            (serde_json::json!({"auths": []}), "not a Docker config file"),
        ];
        for (json, says) in cases {
            let error = lookup("r.example", &[source("Secret ops/pull", json.clone())]).unwrap_err();
            assert!(
                error.to_string().contains(says) && error.to_string().starts_with("Secret ops/pull"),
                "{json}: {error}"
            );
        }
    }
}
