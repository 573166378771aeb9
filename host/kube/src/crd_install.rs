//! Installs the CRDs a Katalog operates, for `ork dev` and the tests: from the entry's
//! `crdFile` when given, otherwise generated from `apiTypes`; then waits until each is
//! Established.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

use crate::manifests::{self, FIELD_MANAGER};
use orkestra_katalog::{Katalog, LoadedCrd, is_builtin_group};

/// Errors of installing CRDs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("CRD \"{crd}\": crdFile")]
    CrdFile {
        crd: String,
        #[source]
        source: Box<manifests::Error>,
    },
    #[error("CRD \"{crd}\": crdFile {file} holds no CustomResourceDefinition for group {group}, kind {kind}")]
    CrdFileMismatch {
        crd: String,
        file: String,
        group: String,
        kind: String,
    },
    #[error("applying the CustomResourceDefinition {name} failed")]
    Apply {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the CustomResourceDefinition {name} was not Established within {}s", timeout.as_secs())]
    NotEstablished { name: String, timeout: Duration },
}

/// The CRD generated from `apiTypes`: a structural schema whose `spec` and `status` keep
/// unknown fields, with the status subresource on and a Ready column.
pub fn generated_crd(crd: &LoadedCrd) -> Value {
    let types = &crd.entry.api_types;
    let plural = crd.plural();
    let preserve = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{}", types.group)},
        "spec": {
            "group": types.group,
            "names": {
                "kind": types.kind,
                "listKind": format!("{}List", types.kind),
                "plural": plural,
                "singular": types.kind.to_lowercase(),
            },
            "scope": if crd.entry.namespaced { "Namespaced" } else { "Cluster" },
            "versions": [{
                "name": types.version,
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": preserve, "status": preserve},
                }},
            }],
        },
    })
}

/// Installs every enabled custom CRD of the Katalog and waits until each is Established.
/// Returns the names of the CustomResourceDefinitions applied.
pub async fn install_crds(client: &kube::Client, katalog: &Katalog, timeout: Duration) -> Result<Vec<String>, Error> {
    let api = crate::objects::all::<CustomResourceDefinition>(client.clone());
    let mut installed = Vec::new();
    for crd in katalog.crds.values().filter(|c| c.entry.enabled) {
        let documents = match &crd.entry.crd_file {
            Some(file) => crd_file_documents(crd, file)?,
            None if is_builtin_group(&crd.entry.api_types.group) => continue,
            None => vec![generated_crd(crd)],
        };
        for document in documents {
            let name = document["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let params = PatchParams::apply(FIELD_MANAGER).force();
            let mut attempt = 0;
            // Two installers creating the same CRD at once: the loser gets a 409 and applies
            // again over what the winner created.
            while let Err(source) = api.patch(&name, &params, &Patch::Apply(&document)).await {
                attempt += 1;
                if attempt >= 3 || !matches!(&source, kube::Error::Api(status) if status.code == 409) {
                    return Err(Error::Apply { name, source });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            installed.push(name);
        }
    }
    for name in &installed {
        let established = await_condition(api.api().clone(), name, conditions::is_crd_established());
        match tokio::time::timeout(timeout, established).await {
            Ok(Ok(_)) => {}
            _ => {
                return Err(Error::NotEstablished {
                    name: name.clone(),
                    timeout,
                });
            }
        }
    }
    Ok(installed)
}

/// The CustomResourceDefinition documents of a `crdFile`; at least one must match the
/// entry's group and kind.
fn crd_file_documents(crd: &LoadedCrd, file: &str) -> Result<Vec<Value>, Error> {
    let path = crd.resolve(file);
    let documents = manifests::read_documents(&path).map_err(|source| Error::CrdFile {
        crd: crd.name.clone(),
        source: Box::new(source),
    })?;
    let documents: Vec<Value> = documents
        .into_iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .collect();
    let types = &crd.entry.api_types;
    let matches = documents
        .iter()
        .any(|d| d["spec"]["group"] == types.group.as_str() && d["spec"]["names"]["kind"] == types.kind.as_str());
    if !matches {
        return Err(Error::CrdFileMismatch {
            crd: crd.name.clone(),
            file: path.display().to_string(),
            group: types.group.clone(),
            kind: types.kind.clone(),
        });
    }
    Ok(documents)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn website(namespaced: bool) -> LoadedCrd {
        let text =
            format!("apiTypes: {{group: demo.orkestra.io, version: v1, kind: Website}}\nnamespaced: {namespaced}\n");
        let node = orkestra_katalog::yaml::parse(&text).unwrap();
        let (entry, problems) = orkestra_katalog::read(&node, "").unwrap();
        assert!(problems.is_empty());
        LoadedCrd {
            name: "website".into(),
            source: "k.yaml".into(),
            entry,
            reads: Default::default(),
        }
    }

    #[test]
    fn generated_crd_should_preserve_spec_and_status_and_enable_the_status_subresource() {
        let crd = generated_crd(&website(true));
        assert_eq!(crd["metadata"]["name"], "websites.demo.orkestra.io");
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1");
        assert_eq!(version["subresources"]["status"], json!({}));
        let props = &version["schema"]["openAPIV3Schema"]["properties"];
        assert_eq!(props["spec"]["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(props["status"]["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(generated_crd(&website(false))["spec"]["scope"], "Cluster");
    }

    #[test]
    fn builtin_groups_have_no_crd() {
        for builtin in ["", "apps", "batch", "networking.k8s.io", "rbac.authorization.k8s.io"] {
            assert!(is_builtin_group(builtin), "{builtin}");
        }
        assert!(!is_builtin_group("demo.orkestra.io"));
    }
}
