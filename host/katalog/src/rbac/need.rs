//! One permission at a time: what the runtime asks the API server about at load, and how
//! a missing one is named (the verb, the resource, where) with the rule that grants it.

use super::{Needs, Scope};

/// One permission the runtime needs: a verb on a resource where `scope` says, on the object
/// `name` only when it names one. What the runtime asks the API server about at load
/// (a SelfSubjectAccessReview each).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Need {
    pub scope: Scope,
    pub group: String,
    pub resource: String,
    pub verb: &'static str,
    pub name: Option<String>,
}

impl Need {
    /// The namespace it holds in (`None`: every namespace, or a cluster-scoped resource).
    pub fn namespace(&self) -> Option<&str> {
        match &self.scope {
            Scope::Cluster => None,
            Scope::Namespace(ns) => Some(ns),
        }
    }

    /// `resource.group` as RBAC and `kubectl auth can-i` name it (`configmaps`,
    /// `deployments.apps`).
    pub fn qualified_resource(&self) -> String {
        match self.group.as_str() {
            "" => self.resource.clone(),
            group => format!("{}.{group}", self.resource),
        }
    }

    /// The rule to add for it, as a line of the Role (or ClusterRole) it belongs in.
    pub fn rbac_line(&self) -> String {
        let names = match &self.name {
            Some(name) => format!(", resourceNames: [{name:?}]"),
            None => String::new(),
        };
        let role = match &self.scope {
            Scope::Cluster => "ClusterRole".to_string(),
            Scope::Namespace(ns) => format!("Role in namespace {ns}"),
        };
        format!(
            "{role}: {{apiGroups: [{:?}], resources: [{}], verbs: [{}]{names}}}",
            self.group, self.resource, self.verb
        )
    }
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.qualified_resource())?;
        if let Some(name) = &self.name {
            write!(f, " {name}")?;
        }
        match &self.scope {
            Scope::Cluster => write!(f, " in every namespace"),
            Scope::Namespace(ns) => write!(f, " in namespace {ns}"),
        }
    }
}

impl Needs {
    /// Every permission, one by one; one a cluster-wide need already covers is left out.
    pub fn each(&self) -> Vec<Need> {
        let mut out = Vec::new();
        for (scope, resources) in &self.any {
            for (key, verbs) in resources {
                let (group, resource) = key;
                for verb in self.beyond_cluster(scope, key, verbs) {
                    out.push(Need {
                        scope: scope.clone(),
                        group: group.clone(),
                        resource: resource.clone(),
                        verb,
                        name: None,
                    });
                }
            }
        }
        for (scope, named) in &self.named {
            for ((group, resource, verb), names) in named {
                for name in names {
                    out.push(Need {
                        scope: scope.clone(),
                        group: group.clone(),
                        resource: resource.clone(),
                        verb,
                        name: Some(name.clone()),
                    });
                }
            }
        }
        out.sort();
        out
    }

    /// Adds everything `other` needs.
    pub fn extend(&mut self, other: &Needs) {
        for (scope, resources) in &other.any {
            for ((group, resource), verbs) in resources {
                let verbs: Vec<&'static str> = verbs.iter().copied().collect();
                self.add(scope.clone(), group, resource, &verbs);
            }
        }
        for (scope, named) in &other.named {
            for ((group, resource, verb), names) in named {
                for name in names {
                    self.add_named(scope.clone(), group, resource, verb, name);
                }
            }
        }
    }
}
