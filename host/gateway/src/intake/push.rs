//! A push from GitHub or GitLab read down to what intake acts on: whether it is to the
//! entry's branch, and the watched files it added or changed (a file removed later in the
//! same push is not fetched; deleted intent files are not acted on, as upstream).

use std::collections::BTreeSet;

use serde::Deserialize;

use orkestra_katalog::model::WatchGlobs;

/// The most files one push may apply; the rest are reported as skipped.
pub const MAX_FILES: usize = 20;

/// The parts of a push event both providers send alike.
#[derive(Debug, Deserialize)]
pub struct Push {
    #[serde(rename = "ref", default)]
    pub reference: String,
    #[serde(default)]
    pub commits: Vec<Commit>,
    /// GitHub: the branch itself was deleted.
    #[serde(default)]
    pub deleted: bool,
    /// GitHub: `owner/name`.
    #[serde(default)]
    pub repository: Option<Repository>,
    /// GitLab: the project's numeric id.
    #[serde(default)]
    pub project_id: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct Repository {
    #[serde(default)]
    pub full_name: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct Commit {
    #[serde(default)]
    pub added: Vec<String>,
    #[serde(default)]
    pub modified: Vec<String>,
    #[serde(default)]
    pub removed: Vec<String>,
}

/// What a push asks of intake.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Nothing to do, and why.
    Ignore(String),
    /// These files, fetched at the branch, then applied; `skipped` are past [`MAX_FILES`].
    Apply { files: Vec<String>, skipped: Vec<String> },
}

impl Push {
    /// What to do for an entry watching `watch` on `branch`.
    pub fn plan(&self, branch: &str, watch: &WatchGlobs) -> Plan {
        let wanted = format!("refs/heads/{branch}");
        if self.reference != wanted {
            return Plan::Ignore(format!("a push to {}, not to {wanted}", self.reference));
        }
        if self.deleted {
            return Plan::Ignore(format!("{wanted} was deleted"));
        }
        let mut touched = BTreeSet::new();
        for commit in &self.commits {
            touched.extend(commit.added.iter().chain(&commit.modified).cloned());
            for gone in &commit.removed {
                touched.remove(gone);
            }
        }
        let mut files: Vec<String> = touched.into_iter().filter(|p| watch.matches(p)).collect();
        if files.is_empty() {
            return Plan::Ignore("no watched file was added or changed".into());
        }
        let skipped = files.split_off(files.len().min(MAX_FILES));
        Plan::Apply { files, skipped }
    }
}

/// A GitHub repository's `owner/name` when both parts are plain names (it goes into an API
/// URL).
pub fn repository_name(full_name: &str) -> Option<(&str, &str)> {
    let (owner, name) = full_name.split_once('/')?;
    let plain = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    (plain(owner) && plain(name)).then_some((owner, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(json: serde_json::Value) -> Push {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn only_watched_files_added_or_changed_on_the_branch_are_applied() {
        let watch = WatchGlobs::new(&["intents/*.yaml".into()]).unwrap();
        let event = push(serde_json::json!({
            "ref": "refs/heads/main",
            "commits": [
                {"added": ["intents/blog.yaml", "README.md"], "modified": ["intents/shop.yaml"]},
                {"added": ["intents/tmp.yaml"], "modified": [], "removed": []},
                {"removed": ["intents/tmp.yaml", "intents/old.yaml"]},
            ],
        }));
        assert_eq!(
            event.plan("main", &watch),
            Plan::Apply {
                files: vec!["intents/blog.yaml".into(), "intents/shop.yaml".into()],
                skipped: vec![]
            }
        );
        assert_eq!(
            event.plan("release", &watch),
            Plan::Ignore("a push to refs/heads/main, not to refs/heads/release".into())
        );
        let other = WatchGlobs::new(&["other/*.yaml".into()]).unwrap();
        assert_eq!(
            event.plan("main", &other),
            Plan::Ignore("no watched file was added or changed".into())
        );
    }

    #[test]
    fn a_push_of_many_files_applies_the_first_twenty() {
        let watch = WatchGlobs::new(&["*.yaml".into()]).unwrap();
        let added: Vec<String> = (0..25).map(|i| format!("f{i:02}.yaml")).collect();
        let event = push(serde_json::json!({"ref": "refs/heads/main", "commits": [{"added": added}]}));
        let Plan::Apply { files, skipped } = event.plan("main", &watch) else {
            panic!()
        };
        assert_eq!((files.len(), skipped.len()), (20, 5));
        assert_eq!(skipped[0], "f20.yaml");
    }

    #[test]
    fn a_deleted_branch_is_not_applied() {
        let watch = WatchGlobs::new(&["*.yaml".into()]).unwrap();
        let event = push(serde_json::json!({"ref": "refs/heads/main", "deleted": true, "commits": []}));
        assert!(matches!(event.plan("main", &watch), Plan::Ignore(_)));
    }

    #[test]
    fn repository_names_are_plain() {
        assert_eq!(repository_name("org/repo.v2"), Some(("org", "repo.v2")));
        for bad in ["org", "org/", "../x", "org/re po", "org/a/b", "org/.."] {
            assert_eq!(repository_name(bad), None, "{bad}");
        }
    }
}
