//! The one way to an API path that carries a name. kube's `Api` puts a name and a namespace
//! into the URL as they are, so a name a tenant chose (`?watch=true`, `a/b`) would turn a
//! read of one object into a watch of a namespace and a delete into a deletecollection.
//! [`Objects`] checks every namespace and name against Kubernetes' rules
//! ([`orkestra_expr::names`]) and percent-encodes the name before kube sees it; the
//! workspace's clippy configuration refuses the named calls of `Api` everywhere else.
//!
//! A refused name is a [`kube::Error::BuildRequest`] naming the rule, so callers keep one
//! error type and their messages say why.

use std::borrow::Cow;
use std::fmt::Debug;

use kube::api::{Api, DeleteParams, ListParams, ObjectList, Patch, PatchParams, PostParams};
use kube::core::request::Error as RequestError;
use kube::core::{DynamicResourceScope, NamespaceResourceScope, Status};
use kube::{Client, Resource};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use orkestra_expr::names::{check_name, check_namespace};

/// What a path segment may keep as it is (RFC 3986's unreserved and sub-delimiters, `:` and
/// `@`); everything else is encoded, `?` and `#` above all.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b':')
    .remove(b'@')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=');

fn refused(why: orkestra_expr::Error) -> kube::Error {
    kube::Error::BuildRequest(RequestError::Validation(why.to_string()))
}

/// `name` checked and encoded for a URL path.
pub fn segment(name: &str) -> Result<Cow<'_, str>, kube::Error> {
    check_name(name).map_err(refused)?;
    Ok(utf8_percent_encode(name, SEGMENT).into())
}

/// The objects of one kind, in one namespace or cluster-wide, addressed by checked names.
#[derive(Clone)]
pub struct Objects<K> {
    api: Api<K>,
}

impl<K> Objects<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    /// Cluster-scoped objects, or a namespaced kind in every namespace.
    pub fn all_with(client: Client, dyntype: &K::DynamicType) -> Self {
        Self {
            api: Api::all_with(client, dyntype),
        }
    }

    /// kube's `Api`, for what names no object (a watch).
    pub fn api(&self) -> &Api<K> {
        &self.api
    }

    pub async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        self.api.list(params).await
    }

    pub async fn create(&self, params: &PostParams, object: &K) -> Result<K, kube::Error>
    where
        K: Serialize,
    {
        self.api.create(params, object).await
    }

    #[expect(clippy::disallowed_methods, reason = "the one checked call")]
    pub async fn get(&self, name: &str) -> Result<K, kube::Error> {
        self.api.get(&segment(name)?).await
    }

    #[expect(clippy::disallowed_methods, reason = "the one checked call")]
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>, kube::Error> {
        self.api.get_opt(&segment(name)?).await
    }

    #[expect(clippy::disallowed_methods, reason = "the one checked call")]
    pub async fn patch<P: Serialize + Debug>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, kube::Error> {
        self.api.patch(&segment(name)?, params, patch).await
    }

    #[expect(clippy::disallowed_methods, reason = "the one checked call")]
    pub async fn patch_status<P: Serialize + Debug>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, kube::Error> {
        self.api.patch_status(&segment(name)?, params, patch).await
    }

    #[expect(clippy::disallowed_methods, reason = "the one checked call")]
    pub async fn replace(&self, name: &str, params: &PostParams, object: &K) -> Result<K, kube::Error>
    where
        K: Serialize,
    {
        self.api.replace(&segment(name)?, params, object).await
    }

    #[expect(clippy::disallowed_methods, reason = "the one checked call")]
    pub async fn delete(&self, name: &str, params: &DeleteParams) -> Result<either::Either<K, Status>, kube::Error> {
        self.api.delete(&segment(name)?, params).await
    }
}

impl<K> Objects<K>
where
    K: Resource<Scope = DynamicResourceScope> + Clone + DeserializeOwned + Debug,
{
    /// The objects of `namespace` (checked: a DNS-1123 label).
    #[expect(clippy::disallowed_methods, reason = "the namespace is checked first")]
    pub fn namespaced_with(client: Client, namespace: &str, dyntype: &K::DynamicType) -> Result<Self, kube::Error> {
        check_namespace(namespace).map_err(refused)?;
        Ok(Self {
            api: Api::namespaced_with(client, namespace, dyntype),
        })
    }

    /// In `namespace` when given, else cluster-wide.
    pub fn within(client: Client, namespace: Option<&str>, dyntype: &K::DynamicType) -> Result<Self, kube::Error> {
        match namespace {
            Some(namespace) => Self::namespaced_with(client, namespace, dyntype),
            None => Ok(Self::all_with(client, dyntype)),
        }
    }
}

/// A namespaced kind known at compile time, in `namespace` (checked: a DNS-1123 label).
#[expect(clippy::disallowed_methods, reason = "the namespace is checked first")]
pub fn namespaced<K>(client: Client, namespace: &str) -> Result<Objects<K>, kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    check_namespace(namespace).map_err(refused)?;
    Ok(Objects {
        api: Api::namespaced(client, namespace),
    })
}

/// A kind known at compile time, cluster-wide.
pub fn all<K>(client: Client) -> Objects<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    Objects::all_with(client, &K::DynamicType::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_one_segment_of_the_path_whatever_it_holds() {
        assert_eq!(segment("web-1").unwrap(), "web-1");
        assert_eq!(segment("system:controller:x").unwrap(), "system:controller:x");
        assert_eq!(segment("?watch=true").unwrap(), "%3Fwatch=true");
        assert_eq!(segment("a#b").unwrap(), "a%23b");
        for bad in ["", "..", "a/b", "%3F"] {
            let error = segment(bad).unwrap_err().to_string();
            assert!(error.contains("name"), "{bad:?}: {error}");
        }
    }
}
