//! Webhook intake, from Katalog to the gateway: what a push entry compiles to (the one
//! [`Repository`] it takes pushes of, its [`WatchGlobs`]), and the checks of every entry: a
//! DNS-label name unique across providers (it is an identity in `serve.tokens`), a path of
//! its own under `/webhooks/`, the secret its provider signs with, and, for pushes, that
//! repository, globs that compile and an API URL the gateway may call.

use std::collections::BTreeSet;

use orkestra_expr::names::is_dns1123_label;

use super::check::secure;
use crate::check::{Checker, item};
use crate::error::Error;
use crate::model::{Gateway, GitEntry, PATH_PREFIX, Provider, SecretKey};
use crate::yaml::Node;

impl Checker<'_> {
    pub(super) fn intake(&mut self, gateway: &Gateway, node: &Node) {
        let Some(webhooks) = gateway.intake() else { return };
        let base = gateway.intake_key();
        let section = match gateway.webhooks.is_some() {
            true => node.get("webhooks"),
            false => node.get("admission").and_then(|a| a.get("webhooks")),
        };
        let tokens: BTreeSet<&str> = gateway.tokens().iter().map(|t| t.name.as_str()).collect();
        let mut names = BTreeSet::new();
        let mut paths = BTreeSet::new();
        let mut index = std::collections::BTreeMap::<Provider, usize>::new();
        for entry in webhooks.entries() {
            let key = entry.provider.key();
            let i = *index.entry(entry.provider).and_modify(|i| *i += 1).or_default();
            let path = format!("{base}.{key}[{i}]");
            let entry_node = item(section.and_then(|s| s.get(key)), i).unwrap_or(node);
            let at = |field: &str| entry_node.get(field).map_or(entry_node.pos, |n| n.pos);
            if !is_dns1123_label(entry.name) || !names.insert(entry.name.to_string()) {
                self.error(
                    format!("{path}.name"),
                    at("name"),
                    "a webhook needs a DNS-label name of its own (unique across github, gitlab, slack and generic): serve.tokens and the serve-source annotation name it",
                );
            }
            if tokens.contains(entry.name) {
                self.error(
                    format!("{path}.name"),
                    at("name"),
                    format!(
                        "\"{}\" is a token of gateway.api.auth.tokens too: one name, one identity",
                        entry.name
                    ),
                );
            }
            let served = entry.path();
            if let Some(why) = path_problem(&served) {
                self.error(format!("{path}.path"), at("path"), why);
            } else if !paths.insert(served.clone()) {
                self.error(
                    format!("{path}.path"),
                    at("path"),
                    format!("{served} is another webhook's path"),
                );
            }
        }
        let section_of = |key: &str| section.and_then(|s| s.get(key));
        for (key, provider, entries) in [
            ("github", Provider::GitHub, &webhooks.github),
            ("gitlab", Provider::GitLab, &webhooks.gitlab),
        ] {
            for (i, entry) in entries.iter().enumerate() {
                let path = format!("{base}.{key}[{i}]");
                let entry_node = item(section_of(key), i).unwrap_or(node);
                let at = |field: &str| entry_node.get(field).map_or(entry_node.pos, |n| n.pos);
                if let Err(why) = entry.repository(provider) {
                    self.error(format!("{path}.repository"), at("repository"), why);
                }
                self.secret(&path, "secretRef", entry.secret_ref.as_ref(), entry_node, true);
                self.secret(
                    &path,
                    "contentTokenRef",
                    entry.content_token_ref.as_ref(),
                    entry_node,
                    false,
                );
                if entry.watch.is_empty() {
                    self.error(
                        format!("{path}.watch"),
                        at("watch"),
                        "is required: the globs of the intent files a push applies",
                    );
                }
                if let Err(why) = WatchGlobs::new(&entry.watch) {
                    self.error(format!("{path}.watch"), at("watch"), format!("not a glob: {why}"));
                }
                if entry.branch.as_deref().is_some_and(|b| b.trim().is_empty()) {
                    self.error(format!("{path}.branch"), at("branch"), "a branch name (default main)");
                }
                if let Some(url) = &entry.api_url
                    && !secure(url)
                {
                    self.error(
                        format!("{path}.apiUrl"),
                        at("apiUrl"),
                        format!("{url:?} must be https:// (plain http only on a loopback address)"),
                    );
                }
            }
        }
        for (i, entry) in webhooks.slack.iter().enumerate() {
            let path = format!("{base}.slack[{i}]");
            let entry_node = item(section_of("slack"), i).unwrap_or(node);
            let at = |field: &str| entry_node.get(field).map_or(entry_node.pos, |n| n.pos);
            self.secret(
                &path,
                "signingSecretRef",
                entry.signing_secret_ref.as_ref(),
                entry_node,
                true,
            );
            for (j, command) in entry.commands.iter().enumerate() {
                if !command.starts_with('/') || command.len() < 2 || command.contains(char::is_whitespace) {
                    self.error(
                        format!("{path}.commands[{j}]"),
                        at("commands"),
                        format!("{command:?} is not a slash command such as \"/deploy\""),
                    );
                }
            }
            for (j, host) in entry.response_hosts.iter().enumerate() {
                if host.is_empty() || host.contains(['/', '@', '?', '#', ' ']) {
                    self.error(
                        format!("{path}.responseHosts[{j}]"),
                        at("responseHosts"),
                        format!("{host:?} is not a host (with an optional :port)"),
                    );
                }
            }
        }
        for (i, entry) in webhooks.generic.iter().enumerate() {
            let path = format!("{base}.generic[{i}]");
            let entry_node = item(section_of("generic"), i).unwrap_or(node);
            self.secret(&path, "secretRef", entry.secret_ref.as_ref(), entry_node, true);
        }
    }

    /// A Secret key an entry reads: name and key given; required or not.
    fn secret(&mut self, path: &str, field: &str, secret: Option<&SecretKey>, node: &Node, required: bool) {
        let at = node.get(field).map_or(node.pos, |n| n.pos);
        match secret {
            None if required => self.error(
                format!("{path}.{field}"),
                at,
                "is required: the gateway refuses deliveries it cannot check",
            ),
            Some(secret) if secret.name.is_empty() || secret.key.is_empty() => {
                self.error(format!("{path}.{field}"), at, "name and key are required")
            }
            _ => {}
        }
    }
}

/// Why a path cannot be an intake path, if it cannot.
fn path_problem(path: &str) -> Option<String> {
    let rest = path.strip_prefix(PATH_PREFIX).unwrap_or_default();
    let fine = path.starts_with(PATH_PREFIX)
        && !rest.is_empty()
        && !rest.ends_with('/')
        && rest
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.'));
    (!fine).then(|| format!("{path:?} is not a path under {PATH_PREFIX} of letters, digits, '-', '_', '.' and '/'"))
}

impl GitEntry {
    /// The repository it takes pushes of, as `provider` names repositories, or what is wrong
    /// with `repository`.
    pub fn repository(&self, provider: Provider) -> Result<Repository, Error> {
        let given = self.repository.as_deref().map(str::trim).unwrap_or_default();
        if given.is_empty() {
            return Err(Error::Intake(
                "is required: the repository whose pushes this entry takes (owner/name on GitHub, a project id or group/project path on GitLab); a delivery for any other is refused"
                    .into(),
            ));
        }
        let plain = |s: &str| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        let segments: Vec<&str> = given.split('/').collect();
        match provider {
            Provider::GitHub => match segments[..] {
                [owner, name] if plain(owner) && plain(name) => Ok(Repository::GitHub {
                    owner: owner.into(),
                    name: name.into(),
                }),
                _ => Err(Error::Intake(format!(
                    "{given:?} is not a GitHub repository's owner/name"
                ))),
            },
            _ => match given.parse::<u64>() {
                Ok(id) => Ok(Repository::GitLabId(id)),
                Err(_) if segments.len() >= 2 && segments.iter().all(|s| plain(s)) => {
                    Ok(Repository::GitLabPath(given.into()))
                }
                Err(_) => Err(Error::Intake(format!(
                    "{given:?} is neither a GitLab project's numeric id nor its group/project path"
                ))),
            },
        }
    }
}

/// The repository a git entry takes pushes of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repository {
    GitHub { owner: String, name: String },
    GitLabId(u64),
    GitLabPath(String),
}

impl Repository {
    /// How the provider's API names it in a path: `owner/name`, or the GitLab project's id or
    /// path (which the caller encodes as one segment).
    pub fn api_name(&self) -> String {
        match self {
            Repository::GitHub { owner, name } => format!("{owner}/{name}"),
            Repository::GitLabId(id) => id.to_string(),
            Repository::GitLabPath(path) => path.clone(),
        }
    }

    /// Whether a push names this repository: GitHub's `repository.full_name` (names are
    /// case-insensitive there), GitLab's `project_id` or `project.path_with_namespace`.
    pub fn is(&self, full_name: Option<&str>, project_id: Option<u64>, project_path: Option<&str>) -> bool {
        match self {
            Repository::GitHub { .. } => full_name.is_some_and(|n| n.eq_ignore_ascii_case(&self.api_name())),
            Repository::GitLabId(id) => project_id == Some(*id),
            Repository::GitLabPath(path) => project_path.is_some_and(|p| p.eq_ignore_ascii_case(path)),
        }
    }
}

impl std::fmt::Display for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Repository::GitLabId(id) => write!(f, "project {id}"),
            other => f.write_str(&other.api_name()),
        }
    }
}

/// A set of `watch` globs, matched against a repository path.
#[derive(Debug, Clone)]
pub struct WatchGlobs(globset::GlobSet);

impl WatchGlobs {
    /// The globs, or the first that is not one, with why.
    pub fn new(globs: &[String]) -> Result<Self, Error> {
        let mut set = globset::GlobSetBuilder::new();
        for glob in globs {
            let compiled = globset::GlobBuilder::new(glob)
                .literal_separator(true)
                .build()
                .map_err(|e| Error::Intake(format!("{glob:?}: {}", e.kind())))?;
            set.add(compiled);
        }
        set.build().map(Self).map_err(|e| Error::Intake(e.to_string()))
    }

    /// Whether a repository path matches any glob.
    pub fn matches(&self, path: &str) -> bool {
        self.0.is_match(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_stays_in_its_directory_and_a_double_star_crosses() {
        let watch = WatchGlobs::new(&["services/*/intent.yaml".into(), "sites/**/*.json".into()]).unwrap();
        assert!(watch.matches("services/payments/intent.yaml"));
        assert!(!watch.matches("services/payments/v2/intent.yaml"));
        assert!(!watch.matches("other/payments/intent.yaml"));
        assert!(watch.matches("sites/a/b/c.json"));
        assert!(watch.matches("sites/c.json"));
        assert!(!watch.matches("sites/c.yaml"));
    }

    #[test]
    fn a_bad_glob_is_named() {
        let error = WatchGlobs::new(&["ok/*".into(), "bad/[".into()]).unwrap_err();
        assert!(error.to_string().contains("\"bad/[\""), "{error}");
    }
}
