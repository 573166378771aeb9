//! Reads one or more Katalog files and merges their CRDs into one [`Katalog`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::model::{CrdEntry, KatalogFile};
use super::{API_VERSION, LEGACY_API_VERSION};

/// Loading errors. Each names the file and, where the parser knows it, the line and column.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file does not exist or cannot be read.
    #[error("cannot read Katalog file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not parse or does not fit the Katalog format.
    #[error("{}{location}: {message}", path.display())]
    Parse {
        path: PathBuf,
        location: String,
        message: String,
    },
    /// A wrong value that the parser accepted.
    #[error("{}: {field}: {message}", path.display())]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// Two files declare the same CRD.
    #[error("CRD \"{name}\" is declared in both {} and {}", first.display(), second.display())]
    DuplicateCrd {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    /// No file was given.
    #[error("no Katalog file given: pass -f KATALOG (default katalog.yaml in the current directory)")]
    NoFiles,
}

/// A CRD entry with the file it came from (relative paths resolve against its folder).
#[derive(Debug, Clone)]
pub struct LoadedCrd {
    pub name: String,
    pub entry: CrdEntry,
    pub source: PathBuf,
}

impl LoadedCrd {
    /// Resolves a path written in the Katalog relative to the Katalog's folder.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let base = self.source.parent().unwrap_or(Path::new("."));
        base.join(path)
    }

    /// The plural, defaulting to the lowercased kind plus `s`.
    pub fn plural(&self) -> String {
        if self.entry.api_types.plural.is_empty() {
            format!("{}s", self.entry.api_types.kind.to_lowercase())
        } else {
            self.entry.api_types.plural.clone()
        }
    }
}

/// Several Katalog files merged.
#[derive(Debug, Clone, Default)]
pub struct Katalog {
    /// The name of the first file's Katalog.
    pub name: String,
    /// Every CRD of every file, by name.
    pub crds: BTreeMap<String, LoadedCrd>,
}

/// Loads and merges the files in order.
pub fn load(paths: &[PathBuf]) -> Result<Katalog, Error> {
    if paths.is_empty() {
        return Err(Error::NoFiles);
    }
    let mut katalog = Katalog::default();
    for path in paths {
        let file = parse_file(path)?;
        if katalog.name.is_empty() {
            katalog.name = file.metadata.name.clone();
        }
        for (name, entry) in file.spec.crds {
            check_crd(path, &name, &entry)?;
            if let Some(first) = katalog.crds.get(&name) {
                return Err(Error::DuplicateCrd {
                    name,
                    first: first.source.clone(),
                    second: path.clone(),
                });
            }
            katalog.crds.insert(
                name.clone(),
                LoadedCrd {
                    name,
                    entry,
                    source: path.clone(),
                },
            );
        }
    }
    Ok(katalog)
}

fn parse_file(path: &Path) -> Result<KatalogFile, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file: KatalogFile = serde_yaml_ng::from_str(&text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        location: e
            .location()
            .map(|l| format!(":{}:{}", l.line(), l.column()))
            .unwrap_or_default(),
        message: e.to_string(),
    })?;
    let invalid = |field: &str, message: String| Error::Invalid {
        path: path.to_path_buf(),
        field: field.to_string(),
        message,
    };
    if file.api_version != API_VERSION && file.api_version != LEGACY_API_VERSION {
        return Err(invalid(
            "apiVersion",
            format!(
                "\"{}\" is not a Katalog apiVersion; use {API_VERSION}",
                file.api_version
            ),
        ));
    }
    if file.kind != "Katalog" {
        return Err(invalid("kind", format!("\"{}\" is not Katalog", file.kind)));
    }
    Ok(file)
}

fn check_crd(path: &Path, name: &str, entry: &CrdEntry) -> Result<(), Error> {
    let invalid = |field: String, message: String| Error::Invalid {
        path: path.to_path_buf(),
        field,
        message,
    };
    if !is_dns1123_label(name) {
        return Err(invalid(
            format!("spec.crds.{name}"),
            "a CRD name must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters".into(),
        ));
    }
    let types = &entry.api_types;
    if types.kind.is_empty() {
        return Err(invalid(format!("spec.crds.{name}.apiTypes.kind"), "is required".into()));
    }
    let custom = !types.group.is_empty();
    if custom && types.version.is_empty() {
        return Err(invalid(
            format!("spec.crds.{name}.apiTypes.version"),
            "is required for a custom resource".into(),
        ));
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    const WEBSITE: &str = "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: demo}
spec:
  crds:
    website:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Website, plural: websites}
      crFiles: [samples/website.yaml]
";

    #[test]
    fn load_should_merge_crds_of_several_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.yaml", WEBSITE);
        let b = write(
            dir.path(),
            "b.yaml",
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    blog:\n      apiTypes: {group: demo.orkestra.io, version: v1, kind: Blog}\n",
        );
        let katalog = load(&[a, b]).unwrap();
        assert_eq!(katalog.name, "demo");
        assert_eq!(katalog.crds.keys().collect::<Vec<_>>(), ["blog", "website"]);
        assert_eq!(katalog.crds["blog"].plural(), "blogs");
        assert_eq!(
            katalog.crds["website"].resolve("samples/website.yaml"),
            dir.path().join("samples/website.yaml")
        );
    }

    #[test]
    fn load_must_reject_the_same_crd_in_two_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.yaml", WEBSITE);
        let b = write(dir.path(), "b.yaml", WEBSITE);
        let err = load(&[a, b]).unwrap_err().to_string();
        assert!(err.contains("CRD \"website\" is declared in both"), "{err}");
    }

    #[test]
    fn load_should_name_a_missing_file() {
        let err = load(&[PathBuf::from("/nonexistent/katalog.yaml")]).unwrap_err();
        assert_eq!(err.to_string(), "cannot read Katalog file /nonexistent/katalog.yaml");
    }

    #[test]
    fn load_should_give_line_and_column_of_a_yaml_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "k.yaml",
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds: [\n",
        );
        let err = load(&[path]).unwrap_err().to_string();
        assert!(err.contains("k.yaml:"), "{err}");
        assert!(err.contains(":4:"), "line of the error expected: {err}");
    }

    #[test]
    fn load_must_reject_a_wrong_api_version_and_a_bad_crd_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "k.yaml", &WEBSITE.replace("orkestra.orkspace.io/v1", "v1"));
        assert!(
            load(&[path])
                .unwrap_err()
                .to_string()
                .contains("apiVersion: \"v1\" is not a Katalog apiVersion")
        );
        let path = write(dir.path(), "k2.yaml", &WEBSITE.replace("website:", "Web_Site:"));
        assert!(
            load(&[path])
                .unwrap_err()
                .to_string()
                .contains("spec.crds.Web_Site: a CRD name must be a DNS-1123 label")
        );
    }

    #[test]
    fn dns1123_labels() {
        for ok in ["a", "web-site", "x1"] {
            assert!(is_dns1123_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
    }
}
