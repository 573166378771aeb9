//! An intent file read through the provider's API at the entry's branch: GitHub's contents
//! API (raw media type) or GitLab's repository files API. The API's address comes from the
//! Katalog only, never from a delivery; redirects are not followed, and a file is read up to
//! [`MAX_FILE`] bytes.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};

/// The largest intent file read.
pub const MAX_FILE: usize = 256 * 1024;

/// Where a file comes from.
pub enum Source<'a> {
    /// `api` (e.g. `https://api.github.com`), `owner/name`.
    GitHub {
        api: &'a str,
        owner: &'a str,
        repo: &'a str,
    },
    /// `api` (e.g. `https://gitlab.com`), the project's id or `group/project` path.
    GitLab { api: &'a str, project: &'a str },
}

/// Everything but RFC 3986's unreserved characters, for one URL path segment or query value
/// (a `/`, `&`, `=` or `+` in a file path or branch name must not change the URL's shape).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

fn encode(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// The file's text at `branch`, read with `token` when given.
pub async fn file(
    http: &reqwest::Client,
    source: &Source<'_>,
    path: &str,
    branch: &str,
    token: Option<&str>,
) -> Result<String, String> {
    let request = match source {
        Source::GitHub { api, owner, repo } => {
            let segments: Vec<String> = path.split('/').map(encode).collect();
            let url = format!(
                "{}/repos/{}/{}/contents/{}?ref={}",
                api.trim_end_matches('/'),
                encode(owner),
                encode(repo),
                segments.join("/"),
                encode(branch)
            );
            let request = http
                .get(url)
                .header("Accept", "application/vnd.github.raw+json")
                .header("X-GitHub-Api-Version", "2022-11-28");
            match token {
                Some(token) => request.bearer_auth(token),
                None => request,
            }
        }
        Source::GitLab { api, project } => {
            let url = format!(
                "{}/api/v4/projects/{}/repository/files/{}/raw?ref={}",
                api.trim_end_matches('/'),
                encode(project),
                encode(path),
                encode(branch)
            );
            let request = http.get(url);
            match token {
                Some(token) => request.header("PRIVATE-TOKEN", token),
                None => request,
            }
        }
    };
    let mut response = request.send().await.map_err(|e| format!("reading {path}: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("reading {path}: the provider answered {status}"));
    }
    if response.content_length().is_some_and(|n| n > MAX_FILE as u64) {
        return Err(format!("{path} is larger than {MAX_FILE} bytes"));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("reading {path}: {e}"))? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_FILE {
            return Err(format!("{path} is larger than {MAX_FILE} bytes"));
        }
    }
    String::from_utf8(bytes).map_err(|_| format!("{path} is not UTF-8 text"))
}

/// An intent file's text (YAML or JSON) as an intent: a mapping.
pub fn intent(path: &str, text: &str) -> Result<Map<String, Value>, String> {
    let value: Value = serde_yaml_ng::from_str(text).map_err(|e| format!("{path} is not YAML: {e}"))?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(format!("{path} is not a mapping of fields (target, name, ...)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_intent_file_is_a_mapping() {
        let intent = intent("a.yaml", "target: site\nname: blog\nreplicas: 2\n").unwrap();
        assert_eq!(intent["target"], "site");
        assert_eq!(intent["replicas"], 2);
        assert!(
            super::intent("a.yaml", "- a\n- b\n")
                .unwrap_err()
                .contains("not a mapping")
        );
        assert!(
            super::intent("a.yaml", "a: [")
                .unwrap_err()
                .starts_with("a.yaml is not YAML")
        );
    }

    #[test]
    fn path_parts_are_encoded() {
        assert_eq!(encode("intents/a b?.yaml"), "intents%2Fa%20b%3F.yaml");
        assert_eq!(encode("feature/x"), "feature%2Fx");
        assert_eq!(encode("a&b=c+d"), "a%26b%3Dc%2Bd");
    }
}
