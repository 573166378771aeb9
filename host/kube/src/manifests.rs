//! YAML manifests in, objects server-side applied out: what `kubectl apply --server-side`
//! does, for `ork dev` and the tests.

use std::path::{Path, PathBuf};

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use serde_json::Value;

use crate::objects::Objects;

/// The field manager of every write the runtime makes.
pub const FIELD_MANAGER: &str = "orkestra";

/// Errors of reading and applying manifests.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read manifest file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: document {index} is not valid YAML", path.display())]
    Parse {
        path: PathBuf,
        index: usize,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("{}: document {index} lacks {field}", path.display())]
    Incomplete {
        path: PathBuf,
        index: usize,
        field: &'static str,
    },
    #[error("the API server does not serve {gvk}: is its CRD installed?")]
    UnknownKind {
        gvk: String,
        #[source]
        source: kube::Error,
    },
    #[error("applying {kind} {name} failed")]
    Apply {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Reads every non-empty YAML document of a file.
pub fn read_documents(path: &Path) -> Result<Vec<Value>, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut documents = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
        let value = serde::Deserialize::deserialize(document).map_err(|source| Error::Parse {
            path: path.to_path_buf(),
            index: index + 1,
            source,
        })?;
        if !matches!(value, Value::Null) {
            documents.push(value);
        }
    }
    Ok(documents)
}

/// The kind's resource and scope, found through discovery.
pub async fn resolve_kind(
    client: &kube::Client,
    gvk: &GroupVersionKind,
) -> Result<(ApiResource, ApiCapabilities), Error> {
    kube::discovery::pinned_kind(client, gvk)
        .await
        .map_err(|source| Error::UnknownKind {
            gvk: format!("{}/{} {}", gvk.group, gvk.version, gvk.kind),
            source,
        })
}

/// One document of a manifest file, resolved to where it goes.
struct Document {
    api: Objects<DynamicObject>,
    kind: String,
    name: String,
    object: DynamicObject,
}

impl Document {
    fn failed(&self, source: kube::Error) -> Error {
        Error::Apply {
            kind: self.kind.clone(),
            name: self.name.clone(),
            source,
        }
    }
}

/// Every document of `path` with the API it goes to; namespaced objects without a namespace
/// go to `default_namespace`.
async fn documents(client: &kube::Client, path: &Path, default_namespace: &str) -> Result<Vec<Document>, Error> {
    let mut documents = Vec::new();
    for (index, document) in read_documents(path)?.into_iter().enumerate() {
        let incomplete = |field| Error::Incomplete {
            path: path.to_path_buf(),
            index: index + 1,
            field,
        };
        let object: DynamicObject = serde_json::from_value(document).map_err(|_| incomplete("apiVersion and kind"))?;
        let types = object.types.clone().ok_or_else(|| incomplete("apiVersion and kind"))?;
        let name = object
            .metadata
            .name
            .clone()
            .ok_or_else(|| incomplete("metadata.name"))?;
        let gvk = GroupVersionKind::try_from(&types).map_err(|_| incomplete("a valid apiVersion"))?;
        let (resource, caps) = resolve_kind(client, &gvk).await?;
        let namespace = match caps.scope {
            Scope::Namespaced => Some(
                object
                    .metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| default_namespace.to_string()),
            ),
            Scope::Cluster => None,
        };
        let api =
            Objects::<DynamicObject>::within(client.clone(), namespace.as_deref(), &resource).map_err(|source| {
                Error::Apply {
                    kind: gvk.kind.clone(),
                    name: name.clone(),
                    source,
                }
            })?;
        documents.push(Document {
            api,
            kind: gvk.kind,
            name,
            object,
        });
    }
    Ok(documents)
}

/// Server-side applies every document of `path`; namespaced objects without a namespace go
/// to `default_namespace`. Returns "Kind/name" for each object applied.
pub async fn apply_file(client: &kube::Client, path: &Path, default_namespace: &str) -> Result<Vec<String>, Error> {
    let mut applied = Vec::new();
    for document in documents(client, path, default_namespace).await? {
        document
            .api
            .patch(
                &document.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&document.object),
            )
            .await
            .map_err(|e| document.failed(e))?;
        applied.push(format!("{}/{}", document.kind, document.name));
    }
    Ok(applied)
}

/// Creates each object of `path` that does not exist yet, and leaves one that does as it is
/// (a sample someone has changed since is not put back). Returns "Kind/name" for each, and
/// whether it was created.
pub async fn create_missing(
    client: &kube::Client,
    path: &Path,
    default_namespace: &str,
) -> Result<Vec<(String, bool)>, Error> {
    let mut made = Vec::new();
    for document in documents(client, path, default_namespace).await? {
        let created = match document.api.create(&Default::default(), &document.object).await {
            Ok(_) => true,
            Err(kube::Error::Api(status)) if status.code == 409 => false,
            Err(error) => return Err(document.failed(error)),
        };
        made.push((format!("{}/{}", document.kind, document.name), created));
    }
    Ok(made)
}
