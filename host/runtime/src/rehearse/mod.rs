//! Rehearsals: what a reconcile would do, found without doing it. A [`dry_run`] client turns
//! every write into the API server's own dry run and records it; [`plan`] reads the record
//! against the objects as they are and says, field by field ([`diff`]), what would be
//! created, changed or deleted. Offline, a [`stand_in`] API server in memory answers the
//! reconcile instead (`ork simulate`).

pub mod diff;
pub mod dry_run;
pub mod plan;
pub mod replay;
pub mod simulate;
pub mod stand_in;

/// An API URL path in parts (`/api/VERSION/...` or `/apis/GROUP/VERSION/...`, then
/// `namespaces/NS/` for a namespaced object): what the plan reads of each write and what the
/// stand-in serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiPath<'p> {
    /// `group/version`, or the version for the core group.
    pub api_version: String,
    pub namespace: Option<&'p str>,
    /// The resource (plural); none for the group version itself (discovery).
    pub resource: Option<&'p str>,
    pub name: Option<&'p str>,
    /// `status`, say.
    pub subresource: Option<&'p str>,
}

impl<'p> ApiPath<'p> {
    /// `path` in parts, or `None` outside `/api` and `/apis`.
    pub(crate) fn parse(path: &'p str) -> Option<Self> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (api_version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => ((*version).to_string(), rest),
            ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", namespace, resource, more @ ..] => (Some(*namespace), {
                let mut all = vec![*resource];
                all.extend_from_slice(more);
                all
            }),
            other => (None, other.to_vec()),
        };
        Some(Self {
            api_version,
            namespace,
            resource: rest.first().copied(),
            name: rest.get(1).copied(),
            subresource: rest.get(2).copied(),
        })
    }
}
