//! `gateway.webhooks` (or the older `gateway.admission.webhooks`): webhook intake. Pushes
//! from GitHub and GitLab, Slack slash commands and signed JSON from anyone become
//! target-mode intents applied through the Serve API's chain, each entry's `name` standing
//! for the caller as a token's name does.

use serde::Deserialize;

use super::SecretKey;

/// `gateway.webhooks`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhooks {
    #[serde(default)]
    pub github: Vec<GitEntry>,
    #[serde(default)]
    pub gitlab: Vec<GitEntry>,
    #[serde(default)]
    pub slack: Vec<SlackEntry>,
    #[serde(default)]
    pub generic: Vec<GenericEntry>,
}

/// Where a delivery comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Provider {
    GitHub,
    GitLab,
    Slack,
    Generic,
}

impl Provider {
    /// Its key under `gateway.webhooks`.
    pub fn key(self) -> &'static str {
        match self {
            Provider::GitHub => "github",
            Provider::GitLab => "gitlab",
            Provider::Slack => "slack",
            Provider::Generic => "generic",
        }
    }
}

/// What every entry has, whatever its provider.
#[derive(Debug, Clone, Copy)]
pub struct Common<'a> {
    pub provider: Provider,
    pub name: &'a str,
    pub enabled: bool,
    /// The path it is served on (`/webhooks/{provider}/{name}` when not given).
    pub path: Option<&'a str>,
}

impl Common<'_> {
    /// The path the entry answers on.
    pub fn path(&self) -> String {
        match self.path {
            Some(path) => path.to_string(),
            None => format!("{PATH_PREFIX}{}/{}", self.provider.key(), self.name),
        }
    }
}

/// Every intake path starts here, so none can shadow another endpoint of the port it
/// shares (the Live API's, the Serve API's, the probes).
pub const PATH_PREFIX: &str = "/webhooks/";

impl Webhooks {
    /// Every entry, with its provider, in declaration order per provider.
    pub fn entries(&self) -> impl Iterator<Item = Common<'_>> {
        let github = self.github.iter().map(|e| e.common(Provider::GitHub));
        let gitlab = self.gitlab.iter().map(|e| e.common(Provider::GitLab));
        let slack = self.slack.iter().map(SlackEntry::common);
        let generic = self.generic.iter().map(GenericEntry::common);
        github.chain(gitlab).chain(slack).chain(generic)
    }

    /// Whether any entry is enabled.
    pub fn any_enabled(&self) -> bool {
        self.entries().any(|e| e.enabled)
    }
}

/// A `github` or `gitlab` entry: a push to `branch` that touches a file matching `watch`
/// fetches that file through the provider's API and applies it as an intent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GitEntry {
    pub name: String,
    /// Off unless `true` (as upstream reads it).
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub path: Option<String>,
    /// The repository whose pushes it takes: `owner/name` on GitHub, a project's numeric id
    /// or its `group/project` path on GitLab. A delivery for any other is refused, and files
    /// are read from this one, never from one a delivery names.
    #[serde(default)]
    pub repository: Option<String>,
    /// The branch whose pushes count (default `main`).
    #[serde(default)]
    pub branch: Option<String>,
    /// Globs over the repository's paths: `*` stays within a directory, `**` crosses them.
    #[serde(default)]
    pub watch: Vec<String>,
    /// GitHub: the webhook's secret (`X-Hub-Signature-256`); GitLab: its secret token
    /// (`X-Gitlab-Token`).
    #[serde(default)]
    pub secret_ref: Option<SecretKey>,
    /// A token the files are read with (none for a public repository).
    #[serde(default)]
    pub content_token_ref: Option<SecretKey>,
    /// The provider's API (default `https://api.github.com`, or `https://gitlab.com` for
    /// GitLab): a self-hosted server's. Never taken from a delivery.
    #[serde(default)]
    pub api_url: Option<String>,
}

impl GitEntry {
    /// What it has of every entry, as a `provider` entry.
    pub fn common(&self, provider: Provider) -> Common<'_> {
        Common {
            provider,
            name: &self.name,
            enabled: self.enabled,
            path: self.path.as_deref(),
        }
    }

    /// The branch whose pushes count.
    pub fn branch(&self) -> &str {
        self.branch.as_deref().unwrap_or("main")
    }
}

/// A `slack` entry: a slash command's text, `<target> key=value ...`, is the intent; the
/// answer comes back to the command's `response_url`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SlackEntry {
    pub name: String,
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub path: Option<String>,
    /// The app's signing secret (`X-Slack-Signature`).
    #[serde(default)]
    pub signing_secret_ref: Option<SecretKey>,
    /// The slash commands taken (any, when empty).
    #[serde(default)]
    pub commands: Vec<String>,
    /// The hosts a `response_url` may point at (default `hooks.slack.com`): the gateway
    /// posts results nowhere else, whatever a delivery says.
    #[serde(default)]
    pub response_hosts: Vec<String>,
}

/// The host Slack's `response_url`s point at.
pub const SLACK_RESPONSE_HOST: &str = "hooks.slack.com";

impl SlackEntry {
    /// What it has of every entry.
    pub fn common(&self) -> Common<'_> {
        Common {
            provider: Provider::Slack,
            name: &self.name,
            enabled: self.enabled,
            path: self.path.as_deref(),
        }
    }

    /// The hosts results may be posted to.
    pub fn response_hosts(&self) -> Vec<String> {
        match self.response_hosts.is_empty() {
            true => vec![SLACK_RESPONSE_HOST.to_string()],
            false => self.response_hosts.clone(),
        }
    }
}

/// A `generic` entry: the body, signed with the entry's secret, is the intent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenericEntry {
    pub name: String,
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub secret_ref: Option<SecretKey>,
}

impl GenericEntry {
    /// What it has of every entry.
    pub fn common(&self) -> Common<'_> {
        Common {
            provider: Provider::Generic,
            name: &self.name,
            enabled: self.enabled,
            path: self.path.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_default_their_path_under_the_prefix() {
        let webhooks: Webhooks = serde_json::from_value(serde_json::json!({
            "github": [{"name": "repo", "enabled": true}],
            "slack": [{"name": "chat", "path": "/webhooks/slack"}],
        }))
        .unwrap();
        let entries: Vec<(String, bool)> = webhooks.entries().map(|e| (e.path(), e.enabled)).collect();
        assert_eq!(
            entries,
            [
                ("/webhooks/github/repo".to_string(), true),
                ("/webhooks/slack".to_string(), false)
            ]
        );
        assert!(webhooks.any_enabled());
    }
}
