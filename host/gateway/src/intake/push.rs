//! A push from GitHub or GitLab read down to what intake acts on: the repository it is of,
//! whether it is to the entry's branch, and the watched files it added or changed (a file
//! removed later in the same push is not fetched; deleted intent files are not acted on, as
//! upstream). A file path must be plain (no `.` or `..` segment, no empty one, no `\`): a
//! glob such as `intents/**` would otherwise let `intents/../../x` leave its folder.

use std::collections::BTreeSet;

use serde::Deserialize;

use orkestra_katalog::gateway::WatchGlobs;

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
    /// GitLab: the project's numeric id, and its path.
    #[serde(default)]
    pub project_id: Option<u64>,
    #[serde(default)]
    pub project: Option<Project>,
}

#[derive(Debug, Deserialize)]
pub struct Repository {
    #[serde(default)]
    pub full_name: String,
}

#[derive(Debug, Deserialize)]
pub struct Project {
    #[serde(default)]
    pub path_with_namespace: String,
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
    /// These files, fetched at the branch, then applied; `skipped` are past [`MAX_FILES`];
    /// `refused` are paths that are not plain, with why.
    Apply {
        files: Vec<String>,
        skipped: Vec<String>,
        refused: Vec<(String, &'static str)>,
    },
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
        let (mut files, mut refused) = (Vec::new(), Vec::new());
        for path in touched.into_iter().filter(|p| watch.matches(p)) {
            match not_plain(&path) {
                Some(why) => refused.push((path, why)),
                None => files.push(path),
            }
        }
        if files.is_empty() && refused.is_empty() {
            return Plan::Ignore("no watched file was added or changed".into());
        }
        let skipped = files.split_off(files.len().min(MAX_FILES));
        Plan::Apply {
            files,
            skipped,
            refused,
        }
    }

    /// Whether the push is of `repository`.
    pub fn is_of(&self, repository: &orkestra_katalog::gateway::Repository) -> bool {
        repository.is(
            self.repository.as_ref().map(|r| r.full_name.as_str()),
            self.project_id,
            self.project.as_ref().map(|p| p.path_with_namespace.as_str()),
        )
    }

    /// The repository the push says it is of, for messages.
    pub fn named(&self) -> String {
        match (&self.repository, self.project_id) {
            (Some(repository), _) => repository.full_name.clone(),
            (None, Some(id)) => format!("project {id}"),
            (None, None) => "no repository".into(),
        }
    }
}

/// Why a file path in a push is not plain, if it is not: what a provider's paths never are,
/// and what could lead out of a watched folder or change the URL it is read at.
fn not_plain(path: &str) -> Option<&'static str> {
    if path.len() > 1024 {
        return Some("longer than 1024 bytes");
    }
    if path.contains('\\') || path.chars().any(char::is_control) {
        return Some("a backslash or a control character in it");
    }
    match path
        .split('/')
        .any(|segment| segment.is_empty() || segment == "." || segment == "..")
    {
        true => Some("an empty, `.` or `..` segment in it"),
        false => None,
    }
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
                skipped: vec![],
                refused: vec![],
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
        let Plan::Apply { files, skipped, .. } = event.plan("main", &watch) else {
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
    fn a_path_that_could_leave_its_folder_is_refused_however_the_glob_matches() {
        let watch = WatchGlobs::new(&["intents/**".into()]).unwrap();
        let event = push(serde_json::json!({"ref": "refs/heads/main", "commits": [{"added": [
            "intents/../../../../user/x.yaml", "intents/./a.yaml", "intents//b.yaml",
            "intents/c\\..\\d.yaml", "intents/ok/e.yaml"]}]}));
        let Plan::Apply { files, refused, .. } = event.plan("main", &watch) else {
            panic!()
        };
        assert_eq!(files, vec!["intents/ok/e.yaml".to_string()]);
        let refused: Vec<&str> = refused.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(refused.len(), 4, "{refused:?}");
        assert!(refused.contains(&"intents/../../../../user/x.yaml"));
    }

    #[test]
    fn a_push_is_of_the_entrys_repository_or_not() {
        use orkestra_katalog::model::{GitEntry, Provider};
        let entry = |repository: &str| GitEntry {
            repository: Some(repository.into()),
            ..Default::default()
        };
        let github = entry("Shop/Web").repository(Provider::GitHub).unwrap();
        let from = |full_name: &str| push(serde_json::json!({"repository": {"full_name": full_name}}));
        assert!(from("shop/web").is_of(&github), "GitHub names are case-insensitive");
        assert!(!from("victim-org/private-repo").is_of(&github));
        let by_id = entry("42").repository(Provider::GitLab).unwrap();
        assert!(push(serde_json::json!({"project_id": 42})).is_of(&by_id));
        assert!(!push(serde_json::json!({"project_id": 43})).is_of(&by_id));
        let by_path = entry("group/sub/app").repository(Provider::GitLab).unwrap();
        assert!(
            push(serde_json::json!({"project_id": 7, "project": {"path_with_namespace": "group/sub/app"}}))
                .is_of(&by_path)
        );
        for bad in ["org", "org/", "../x", "org/re po", "org/a/b", "org/.."] {
            assert!(entry(bad).repository(Provider::GitHub).is_err(), "{bad}");
        }
        assert!(
            GitEntry::default()
                .repository(Provider::GitHub)
                .unwrap_err()
                .to_string()
                .starts_with("is required")
        );
    }
}
