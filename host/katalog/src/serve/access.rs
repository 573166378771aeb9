//! Who may do what through the Serve API, the gateway's stage 2. A surface's own token list
//! and the CRD's list both have to allow a call (a surface narrows access, never widens
//! it). With neither declared no token may: a CRD is closed until its Katalog names who may
//! use it, and `"*"` names every token of the gateway (upstream opens an undeclared CRD to
//! every token; here one tenant's token never writes another's CRs by default). Each list
//! grants verbs per endpoint class (`schema`, `resources`, falling back to `global`) and may
//! restrict the namespaces.

use crate::error::Error;
use std::collections::BTreeMap;

use super::compile::Surface;
use crate::model::{TokenAccess, Verb};

/// Which endpoints a call is to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `/api/v1/schema`, `/api/v1/raw-schema`.
    Schema,
    /// `/api/v1/resources/...`, `/api/v1/apply`.
    Resources,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Schema => "schema",
            Class::Resources => "resources",
        }
    }
}

/// Whether `token` may `verb` on `surface` in `namespace` (`None` for a cluster-scoped CR);
/// the reason when not.
pub fn permits(surface: &Surface, token: &str, class: Class, verb: Verb, namespace: Option<&str>) -> Result<(), Error> {
    if surface.tokens.is_none() && surface.crd_tokens.is_none() {
        return Err(Error::NotPermitted(format!(
            "target \"{}\" names no tokens (serve.tokens), so none may use it; list the tokens that may, or \"*\" for every token of the gateway",
            surface.name
        )));
    }
    for (level, list) in [("target", &surface.tokens), ("CRD", &surface.crd_tokens)] {
        let Some(list) = list else { continue };
        check(list, level, &surface.name, token, class, verb, namespace)?;
    }
    Ok(())
}

/// The `serve.tokens` key that stands for every token of the gateway.
pub const EVERY_TOKEN: &str = "*";

fn check(
    list: &BTreeMap<String, TokenAccess>,
    level: &str,
    surface: &str,
    token: &str,
    class: Class,
    verb: Verb,
    namespace: Option<&str>,
) -> Result<(), Error> {
    let Some(access) = list.get(token).or_else(|| list.get(EVERY_TOKEN)) else {
        return Err(Error::NotPermitted(format!(
            "token \"{token}\" may not use target \"{surface}\" (not in its {level} tokens)"
        )));
    };
    let permissions = &access.permissions;
    let own = match class {
        Class::Schema => &permissions.schema,
        Class::Resources => &permissions.resources,
    };
    let grants = if own.is_empty() { &permissions.global } else { own };
    if !grants.iter().any(|g| g.allows(verb)) {
        return Err(Error::NotPermitted(format!(
            "token \"{token}\" may not {} {} of target \"{surface}\"",
            verb_name(verb),
            class.name()
        )));
    }
    if let Some(namespace) = namespace
        && !access.namespaces.is_empty()
        && !access.namespaces.iter().any(|n| n == namespace)
    {
        return Err(Error::NotPermitted(format!(
            "token \"{token}\" may not use namespace \"{namespace}\" (allowed: {})",
            access.namespaces.join(", ")
        )));
    }
    Ok(())
}

fn verb_name(verb: Verb) -> &'static str {
    match verb {
        Verb::Get => "get",
        Verb::List => "list",
        Verb::Create => "create",
        Verb::Update => "update",
        Verb::Delete => "delete",
        Verb::Apply => "apply",
        Verb::All => "*",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Permissions;

    fn access(global: &[Verb], resources: &[Verb], namespaces: &[&str]) -> TokenAccess {
        TokenAccess {
            namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
            permissions: Permissions {
                global: global.to_vec(),
                schema: Vec::new(),
                resources: resources.to_vec(),
            },
        }
    }

    fn surface(target: Option<&[(&str, TokenAccess)]>, crd: Option<&[(&str, TokenAccess)]>) -> Surface {
        let list = |l: Option<&[(&str, TokenAccess)]>| {
            l.map(|entries| entries.iter().map(|(n, a)| (n.to_string(), a.clone())).collect())
        };
        Surface {
            name: "preview".into(),
            primary: false,
            enabled: true,
            tokens: list(target),
            crd_tokens: list(crd),
            response: Default::default(),
            target_mode: true,
            cr_mode: true,
            overrides: Default::default(),
            field_selector: Default::default(),
            clusters: Vec::new(),
        }
    }

    #[test]
    fn with_no_lists_no_token_may_and_a_class_list_wins_over_global() {
        let closed = surface(None, None);
        let refused = permits(&closed, "anyone", Class::Resources, Verb::Get, Some("ns")).unwrap_err();
        assert!(
            refused.to_string().contains("names no tokens (serve.tokens)"),
            "{refused}"
        );
        let open = surface(None, Some(&[("*", access(&[Verb::Get], &[], &[]))]));
        assert!(permits(&open, "anyone", Class::Resources, Verb::Get, Some("ns")).is_ok());
        assert!(permits(&open, "anyone", Class::Resources, Verb::Delete, Some("ns")).is_err());
        let reader = surface(
            None,
            Some(&[("ci", access(&[Verb::All], &[Verb::Get, Verb::List], &[]))]),
        );
        assert!(permits(&reader, "ci", Class::Resources, Verb::Get, None).is_ok());
        assert!(
            permits(&reader, "ci", Class::Schema, Verb::List, None).is_ok(),
            "global covers schema"
        );
        let denied = permits(&reader, "ci", Class::Resources, Verb::Create, None).unwrap_err();
        assert!(denied.to_string().contains("may not create resources"), "{denied}");
        assert!(permits(&reader, "other", Class::Resources, Verb::Get, None).is_err());
    }

    #[test]
    fn a_surface_narrows_the_crd_list_and_never_widens_it() {
        let crd = [("ci", access(&[], &[Verb::Get], &[]))];
        let wide = [("ci", access(&[Verb::All], &[], &[]))];
        let narrowed = surface(Some(&wide), Some(&crd));
        assert!(
            permits(&narrowed, "ci", Class::Resources, Verb::Create, None).is_err(),
            "the CRD's read-only grant still holds"
        );
        let only_admin = surface(Some(&[("admin", access(&[Verb::All], &[], &[]))]), None);
        assert!(permits(&only_admin, "ci", Class::Resources, Verb::Get, None).is_err());
        assert!(permits(&only_admin, "admin", Class::Resources, Verb::Apply, None).is_ok());
    }

    #[test]
    fn namespaces_restrict_namespaced_calls_only() {
        let scoped = surface(None, Some(&[("ci", access(&[Verb::Apply], &[], &["team-a"]))]));
        assert!(permits(&scoped, "ci", Class::Resources, Verb::Update, Some("team-a")).is_ok());
        assert!(permits(&scoped, "ci", Class::Resources, Verb::Update, Some("team-b")).is_err());
        assert!(
            permits(&scoped, "ci", Class::Resources, Verb::Create, None).is_ok(),
            "cluster-scoped"
        );
        assert!(permits(&scoped, "ci", Class::Resources, Verb::Delete, Some("team-a")).is_err());
    }
}
