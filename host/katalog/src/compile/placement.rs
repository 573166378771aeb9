//! Where an entry's objects go: the custom resource's own namespace by default, the one
//! `namespace` names, or one copy in each of `toNamespaces`.
//!
//! A namespace a template renders is chosen by whoever writes the CR, and the host writes
//! there with its own identity. So a rendered namespace is honoured only when it is the
//! CR's own or listed in the CRD's `allowedNamespaces` (the namespaces the Katalog's author
//! gave this operator); one written literally in the Katalog is the author's choice. A
//! `restrictedNamespaces` entry is never written, literal or not. The same rule holds for
//! the namespace a copy reads from (`fromNamespace`). It also bounds how many copies a CR
//! can ask for.

use crate::error::Error;
use serde_json::Value;

use super::{CompiledBox, Entry};
use orkestra_expr::names::is_dns1123_label;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::tree::Tree;

impl Entry {
    /// The namespaces this entry's objects go to, each checked; `None` when that is the CR's
    /// own (or, for a `custom` entry without `namespace`, whatever its template says).
    pub fn placements(
        &self,
        resolver: &Resolver<'_, '_>,
        own: Option<&str>,
        guard: &CompiledBox,
    ) -> Result<Option<Vec<String>>, Error> {
        if !self.kind.namespaced && self.kind.key != "custom" {
            return Ok(None);
        }
        if let Some(targets) = self.fields.get("toNamespaces") {
            let mut namespaces: Vec<String> = Vec::new();
            let items = match targets {
                Tree::List(items) => items.as_slice(),
                single => std::slice::from_ref(single),
            };
            for item in items {
                let literal = matches!(item, Tree::Literal(_));
                for namespace in rendered_names(item, resolver).map_err(Error::Placement)? {
                    admit(&namespace, literal, own, guard)
                        .map_err(|why| Error::Placement(format!("toNamespaces: {why}")))?;
                    if !namespaces.contains(&namespace) {
                        namespaces.push(namespace);
                    }
                }
            }
            return Ok(Some(namespaces));
        }
        let Some(template) = &self.namespace else {
            return Ok(None);
        };
        let namespace = resolver
            .render(template)
            .map_err(|e| Error::Placement(format!("namespace: {}", e.message)))?;
        if namespace.is_empty() || Some(namespace.as_str()) == own {
            return Ok(None);
        }
        admit(&namespace, template.is_literal(), own, guard)
            .map_err(|why| Error::Placement(format!("namespace: {why}")))?;
        Ok(Some(vec![namespace]))
    }
}

/// Whether the host may write in (or read from) `namespace` for a CR in `own`.
pub fn admit(namespace: &str, literal: bool, own: Option<&str>, guard: &CompiledBox) -> Result<(), Error> {
    if !is_dns1123_label(namespace) {
        return Err(Error::Placement(format!("\"{namespace}\" is not a namespace name")));
    }
    if guard.restricted_namespaces.iter().any(|n| n == namespace) {
        return Err(Error::Placement(format!(
            "\"{namespace}\" is listed in restrictedNamespaces"
        )));
    }
    if literal || own == Some(namespace) || guard.allowed_namespaces.iter().any(|n| n == namespace) {
        return Ok(());
    }
    Err(Error::Placement(format!(
        "renders to \"{namespace}\", which the custom resource picked; a namespace other than its own must be written literally in the Katalog or listed in allowedNamespaces"
    )))
}

/// The namespace names one `toNamespaces` item stands for: a name, a list of names (a
/// template such as `{{ .spec.targetNamespaces }}`), or names separated by commas.
fn rendered_names(item: &Tree, resolver: &Resolver<'_, '_>) -> Result<Vec<String>, String> {
    let value = match item {
        Tree::Literal(value) => value.clone(),
        Tree::Template(template) => resolver
            .evaluate(template)
            .map_err(|e| format!("toNamespaces: {}", e.message))?,
        Tree::List(_) | Tree::Map(_) => return Err("toNamespaces: an item must be a name or a list of names".into()),
    };
    let mut names = Vec::new();
    let mut push = |value: &Value| match value {
        Value::String(text) => {
            names.extend(
                text.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            );
            Ok(())
        }
        Value::Null => Ok(()),
        other => Err(format!("toNamespaces: {other} is not a namespace name")),
    };
    match &value {
        Value::Array(items) => items.iter().try_for_each(&mut push)?,
        single => push(single)?,
    }
    Ok(names)
}
