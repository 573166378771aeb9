//! Where the Control Center is served ([`BASE`]) and which runtimes it watches: given on
//! the command line, kept in a config file when one is named (added and removed from the UI
//! are written back to it), each with the token its Live API asks for.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where the Control Center is served.
pub const BASE: &str = "/controlcenter";

/// One runtime's Live API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Shown in the UI and in its URLs; defaults to the URL's host and port.
    #[serde(default)]
    pub name: String,
    /// `http://host:port` of its Live API.
    pub url: String,
    /// The environment variable holding the bearer token its Live API asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// Added from the UI (kept so in the config file): whoever can reach the UI chose its
    /// URL, so it gets no token the operator did not allow for such runtimes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_ui: bool,
    /// Found by discovery (a labelled Service), not configured: never written to the config
    /// file, and dropped when its Service goes.
    #[serde(skip)]
    pub discovered: bool,
}

/// The config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub runtimes: Vec<RuntimeConfig>,
}

/// Config errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: serde_yaml_ng::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Runtime(String),
}

impl ConfigFile {
    /// Reads `path`; a file that does not exist yet is an empty config.
    pub fn read(path: &Path) -> Result<Self, Error> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_yaml_ng::from_str(&text).map_err(|source| Error::Parse {
                path: path.to_path_buf(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(Error::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Writes it through a temporary file, so a crash leaves the old or the new one.
    pub fn write(&self, path: &Path) -> Result<(), Error> {
        let failed = |source| Error::Write {
            path: path.to_path_buf(),
            source,
        };
        let text = serde_yaml_ng::to_string(self).map_err(|e| failed(std::io::Error::other(e)))?;
        let partial = path.with_extension("partial");
        std::fs::write(&partial, text).map_err(failed)?;
        std::fs::rename(&partial, path).map_err(failed)
    }
}

impl RuntimeConfig {
    /// A runtime at `url`, checked: an http(s) URL; its name (given, or host and port) must
    /// be a plain slug, as it goes into the UI's paths.
    pub fn new(url: &str, name: Option<&str>, token_env: Option<String>) -> Result<Self, Error> {
        let url = url.trim().trim_end_matches('/').to_string();
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| Error::Runtime(format!("{url:?} is not an http(s) URL of a runtime's Live API")))?;
        let host = rest.split('/').next().unwrap_or_default();
        if host.is_empty() {
            return Err(Error::Runtime(format!("{url:?} names no host")));
        }
        let name = match name.map(str::trim).filter(|n| !n.is_empty()) {
            Some(name) => name.to_string(),
            None => host.replace([':', '.'], "-"),
        };
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') || name.len() > 63 {
            return Err(Error::Runtime(format!(
                "runtime name {name:?}: letters, digits, '-' and '_' only, at most 63"
            )));
        }
        Ok(Self {
            name,
            url,
            token_env,
            from_ui: false,
            discovered: false,
        })
    }

    /// The configured name, or one derived from the URL.
    pub fn checked(self) -> Result<Self, Error> {
        let name = (!self.name.is_empty()).then_some(self.name.as_str());
        let checked = Self::new(&self.url, name, self.token_env.clone())?;
        Ok(Self {
            from_ui: self.from_ui,
            discovered: self.discovered,
            ..checked
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_needs_an_http_url_and_gets_a_slug_name() {
        let runtime = RuntimeConfig::new("http://10.0.0.7:8080/", None, None).unwrap();
        assert_eq!(
            (runtime.name.as_str(), runtime.url.as_str()),
            ("10-0-0-7-8080", "http://10.0.0.7:8080")
        );
        assert!(
            RuntimeConfig::new("ftp://x", None, None)
                .unwrap_err()
                .to_string()
                .contains("not an http(s) URL")
        );
        assert!(RuntimeConfig::new("http://x", Some("no spaces"), None).is_err());
    }

    #[test]
    fn the_config_file_round_trips() {
        let dir = std::env::temp_dir().join(format!("cc-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cc.yaml");
        assert_eq!(ConfigFile::read(&path).unwrap(), ConfigFile::default(), "absent: empty");
        let config = ConfigFile {
            runtimes: vec![RuntimeConfig::new("http://a:8080", Some("a"), Some("A_TOKEN".into())).unwrap()],
        };
        config.write(&path).unwrap();
        assert_eq!(ConfigFile::read(&path).unwrap(), config);
        std::fs::write(&path, "runtimes: [{url: http://a, colour: red}]").unwrap();
        assert!(ConfigFile::read(&path).unwrap_err().to_string().contains("colour"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
