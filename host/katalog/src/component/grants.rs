//! Capabilities: which verbs a component may use on which kinds in which namespaces. Nothing
//! is granted by default; a denial names the grant that would have allowed the call.

use crate::error::Error;
use std::fmt;

use crate::model::Capability;

/// What a component does to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Apply,
    Delete,
    PatchStatus,
}

impl Verb {
    const ALL: [Verb; 5] = [Verb::Get, Verb::List, Verb::Apply, Verb::Delete, Verb::PatchStatus];

    pub fn name(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Apply => "apply",
            Verb::Delete => "delete",
            Verb::PatchStatus => "patch-status",
        }
    }
}

/// Where a grant holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Namespaces {
    /// Every namespace, and cluster-scoped objects.
    Any,
    /// These names; `self_ns` adds the custom resource's own namespace.
    Listed { names: Vec<String>, self_ns: bool },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    /// `None` for any apiVersion.
    api_version: Option<String>,
    /// `None` for any kind.
    kinds: Option<Vec<String>>,
    verbs: Vec<Verb>,
    namespaces: Namespaces,
    /// May write objects another custom resource controls.
    others: bool,
    /// Recordings may keep the values of the Secrets it covers.
    record_secrets: bool,
}

/// One grant as data.
pub struct GrantView<'a> {
    /// `None`: any apiVersion.
    pub api_version: Option<&'a str>,
    /// `None`: any kind.
    pub kinds: Option<&'a [String]>,
    pub verbs: &'a [Verb],
    /// `None`: any namespace; else the names and whether the CR's own is one.
    pub namespaces: Option<(&'a [String], bool)>,
}

impl Grant {
    fn covers(&self, access: Access<'_>, own: Option<&str>) -> bool {
        self.verbs.contains(&access.verb)
            && self.api_version.as_deref().is_none_or(|v| v == access.api_version)
            && self.kinds.as_ref().is_none_or(|k| k.iter().any(|k| k == access.kind))
            && match (&self.namespaces, access.namespace) {
                (Namespaces::Any, _) => true,
                (Namespaces::Listed { .. }, None) => false,
                (Namespaces::Listed { names, self_ns }, Some(ns)) => {
                    names.iter().any(|n| n == ns) || (*self_ns && own == Some(ns))
                }
            }
    }
}

/// The grants of one component.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants(Vec<Grant>);

/// One access the component asks for.
#[derive(Debug, Clone, Copy)]
pub struct Access<'a> {
    pub verb: Verb,
    pub api_version: &'a str,
    pub kind: &'a str,
    /// `None`: cluster-scoped, or every namespace (a list without a namespace).
    pub namespace: Option<&'a str>,
}

impl fmt::Display for Access<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.verb.name(), self.api_version, self.kind)?;
        match self.namespace {
            Some(ns) => write!(f, " in namespace {ns:?}"),
            None => f.write_str(" cluster-wide"),
        }
    }
}

impl Grants {
    /// Compiles `capabilities[]`; errors name the entry and the field.
    pub fn compile(capabilities: &[Capability]) -> Result<Self, Error> {
        let mut grants = Vec::with_capacity(capabilities.len());
        for (i, cap) in capabilities.iter().enumerate() {
            let at = format!("capabilities[{i}]");
            if cap.kinds.is_empty() {
                return Err(Error::ComponentSpec(format!(
                    "{at}.kinds: list at least one kind (or \"*\")"
                )));
            }
            if cap.verbs.is_empty() {
                return Err(Error::ComponentSpec(format!(
                    "{at}.verbs: list at least one verb (or \"*\")"
                )));
            }
            let mut verbs = Vec::new();
            for verb in &cap.verbs {
                if verb == "*" {
                    verbs.extend(Verb::ALL);
                    continue;
                }
                match Verb::ALL.iter().find(|v| v.name() == verb) {
                    Some(v) => verbs.push(*v),
                    None => {
                        return Err(Error::ComponentSpec(format!(
                            "{at}.verbs: unknown verb {verb:?}; expected get, list, apply, delete, patch-status or *"
                        )));
                    }
                }
            }
            let namespaces = if cap.namespaces.iter().any(|n| n == "*") {
                Namespaces::Any
            } else if cap.namespaces.is_empty() {
                Namespaces::Listed {
                    names: Vec::new(),
                    self_ns: true,
                }
            } else {
                Namespaces::Listed {
                    names: cap.namespaces.iter().filter(|n| *n != "self").cloned().collect(),
                    self_ns: cap.namespaces.iter().any(|n| n == "self"),
                }
            };
            grants.push(Grant {
                api_version: cap.api_version.clone().filter(|v| v != "*"),
                kinds: (!cap.kinds.iter().any(|k| k == "*")).then(|| cap.kinds.clone()),
                verbs,
                namespaces,
                others: cap.controlled_by_others,
                record_secrets: cap.record_secrets,
            });
        }
        Ok(Self(grants))
    }

    /// Each grant as data, for the RBAC a Katalog needs.
    pub fn each(&self) -> impl Iterator<Item = GrantView<'_>> {
        self.0.iter().map(|g| GrantView {
            api_version: g.api_version.as_deref(),
            kinds: g.kinds.as_deref(),
            verbs: &g.verbs,
            namespaces: match &g.namespaces {
                Namespaces::Any => None,
                Namespaces::Listed { names, self_ns } => Some((names.as_slice(), *self_ns)),
            },
        })
    }

    /// Each grant in words (`get, list apps/v1 Deployment in self, team-a`), for the Live API.
    pub fn describe(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|g| {
                let verbs: Vec<&str> = g.verbs.iter().map(|v| v.name()).collect();
                let kinds = g.kinds.as_ref().map_or_else(|| "*".to_string(), |k| k.join(", "));
                let where_ = match &g.namespaces {
                    Namespaces::Any => "every namespace".to_string(),
                    Namespaces::Listed { names, self_ns } => {
                        let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
                        if *self_ns {
                            all.insert(0, "self");
                        }
                        format!("in {}", all.join(", "))
                    }
                };
                format!(
                    "{} {} {kinds} {where_}",
                    verbs.join(", "),
                    g.api_version.as_deref().unwrap_or("*")
                )
            })
            .collect()
    }

    /// Whether a grant that covers `access` lets it touch objects other custom resources
    /// control (`controlledByOthers`).
    pub fn others(&self, access: Access<'_>, own: Option<&str>) -> bool {
        self.0.iter().any(|g| g.others && g.covers(access, own))
    }

    /// Whether a recording of the component's calls may keep Secret values: some grant that
    /// covers Secrets says `recordSecrets: true`.
    pub fn records_secrets(&self) -> bool {
        self.0.iter().any(|g| {
            g.record_secrets
                && g.api_version.as_deref().is_none_or(|v| v == "v1")
                && g.kinds.as_ref().is_none_or(|k| k.iter().any(|k| k == "Secret"))
        })
    }

    /// Allows `access` when one grant covers it; `own` is the custom resource's namespace.
    /// The error is the message of a `forbidden` answer.
    pub fn check(&self, access: Access<'_>, own: Option<&str>) -> Result<(), Error> {
        if self.0.iter().any(|g| g.covers(access, own)) {
            return Ok(());
        }
        let namespaces = match access.namespace {
            Some(ns) if own == Some(ns) => "[self]".to_string(),
            Some(ns) => format!("[{ns}]"),
            None => "[\"*\"]".to_string(),
        };
        Err(Error::NotGranted(format!(
            "{access} is not granted; it needs the capability {{apiVersion: {}, kinds: [{}], verbs: [{}], namespaces: {namespaces}}}",
            access.api_version,
            access.kind,
            access.verb.name()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(api_version: &str, kinds: &[&str], verbs: &[&str], namespaces: &[&str]) -> Capability {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Capability {
            api_version: Some(api_version.into()),
            kinds: strings(kinds),
            verbs: strings(verbs),
            namespaces: strings(namespaces),
            controlled_by_others: false,
            record_secrets: false,
        }
    }

    #[test]
    fn secret_values_are_recorded_only_under_a_grant_on_secrets_that_says_so() {
        let plain = Grants::compile(&[cap("v1", &["Secret"], &["get"], &[])]).unwrap();
        assert!(!plain.records_secrets(), "off by default");
        let elsewhere = Capability {
            record_secrets: true,
            ..cap("v1", &["ConfigMap"], &["get"], &[])
        };
        assert!(
            !Grants::compile(&[elsewhere]).unwrap().records_secrets(),
            "a grant on other kinds cannot allow it"
        );
        for kinds in [&["Secret"][..], &["*"][..]] {
            let allowed = Capability {
                record_secrets: true,
                ..cap("v1", kinds, &["get"], &[])
            };
            assert!(Grants::compile(&[allowed]).unwrap().records_secrets(), "{kinds:?}");
        }
    }

    fn access<'a>(verb: Verb, kind: &'a str, namespace: Option<&'a str>) -> Access<'a> {
        Access {
            verb,
            api_version: "v1",
            kind,
            namespace,
        }
    }

    #[test]
    fn nothing_is_granted_by_default() {
        let grants = Grants::compile(&[]).unwrap();
        let denied = grants.check(access(Verb::Get, "ConfigMap", Some("a")), Some("a"));
        assert_eq!(
            denied.unwrap_err().to_string(),
            "get v1 ConfigMap in namespace \"a\" is not granted; it needs the capability \
             {apiVersion: v1, kinds: [ConfigMap], verbs: [get], namespaces: [self]}"
        );
    }

    #[test]
    fn a_grant_covers_its_verbs_kinds_and_namespaces_only() {
        let grants = Grants::compile(&[cap("v1", &["ConfigMap"], &["get", "apply"], &[])]).unwrap();
        let own = Some("team-a");
        assert!(grants.check(access(Verb::Get, "ConfigMap", own), own).is_ok());
        assert!(grants.check(access(Verb::Apply, "ConfigMap", own), own).is_ok());
        assert!(grants.check(access(Verb::Delete, "ConfigMap", own), own).is_err());
        assert!(grants.check(access(Verb::Get, "Secret", own), own).is_err());
        assert!(
            grants
                .check(access(Verb::Get, "ConfigMap", Some("kube-system")), own)
                .unwrap_err()
                .to_string()
                .contains("namespaces: [kube-system]")
        );
        assert!(grants.check(access(Verb::List, "ConfigMap", None), own).is_err());
        let other = Access {
            api_version: "apps/v1",
            ..access(Verb::Get, "ConfigMap", own)
        };
        assert!(grants.check(other, own).is_err());
    }

    #[test]
    fn wildcards_and_named_namespaces() {
        let grants = Grants::compile(&[
            cap("*", &["*"], &["list"], &["*"]),
            cap("v1", &["Secret"], &["*"], &["shared", "self"]),
        ])
        .unwrap();
        let own = Some("a");
        assert!(grants.check(access(Verb::List, "Pod", None), own).is_ok());
        assert!(
            grants
                .check(access(Verb::Delete, "Secret", Some("shared")), own)
                .is_ok()
        );
        assert!(grants.check(access(Verb::PatchStatus, "Secret", own), own).is_ok());
        assert!(grants.check(access(Verb::Delete, "Secret", Some("b")), own).is_err());
        assert!(
            !grants.others(access(Verb::Delete, "Secret", own), own),
            "others' objects need their own say"
        );
        let open = Grants::compile(&[Capability {
            controlled_by_others: true,
            ..cap("v1", &["Secret"], &["delete"], &[])
        }])
        .unwrap();
        assert!(open.others(access(Verb::Delete, "Secret", own), own));
        assert!(
            !open.others(access(Verb::Delete, "Secret", Some("b")), own),
            "only where it is granted"
        );
    }

    #[test]
    fn bad_capabilities_name_the_field() {
        let unknown = Grants::compile(&[cap("v1", &["Pod"], &["steal"], &[])]).unwrap_err();
        assert!(
            unknown
                .to_string()
                .starts_with("capabilities[0].verbs: unknown verb \"steal\""),
            "{unknown}"
        );
        let empty = Grants::compile(&[cap("v1", &[], &["get"], &[])]).unwrap_err();
        assert!(empty.to_string().starts_with("capabilities[0].kinds"), "{empty}");
    }
}
