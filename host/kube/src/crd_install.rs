//! Installs the CRDs a Katalog operates, for `ork dev` and the tests: from the entry's
//! `crdFile` when given, otherwise generated from `apiTypes`; then waits until each is
//! Established, and (`ork dev`) until the garbage collector knows each kind.

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
    #[error("probing the garbage collector for {name} failed")]
    Probe {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the garbage collector did not see {} within {}s (is kube-controller-manager running?)", names.join(", "), timeout.as_secs())]
    NotCollected { names: Vec<String>, timeout: Duration },
}

/// Where the probes live: every cluster has it.
const PROBE_NAMESPACE: &str = "default";

/// Waits until the garbage collector knows the kinds of the CustomResourceDefinitions
/// `names`: children owned by a CR of a kind it has not discovered yet are not collected
/// when the CR goes (it rediscovers kinds about every 30 s). The proof: per kind, a
/// ConfigMap owned by a CR of that kind that does not exist, which the collector deletes
/// once it can look that kind up.
pub async fn wait_collected(client: &kube::Client, names: &[String], timeout: Duration) -> Result<(), Error> {
    let crds = crate::objects::all::<CustomResourceDefinition>(client.clone());
    let maps = crate::objects::namespaced::<k8s_openapi::api::core::v1::ConfigMap>(client.clone(), PROBE_NAMESPACE)
        .map_err(|source| Error::Probe {
            name: PROBE_NAMESPACE.into(),
            source,
        })?;
    let probe_error = |name: &str| {
        let name = name.to_string();
        move |source| Error::Probe { name, source }
    };
    let mut probes = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let crd = crds.get(name).await.map_err(probe_error(name))?;
        let spec = &crd.spec;
        let Some(version) = spec.versions.iter().find(|v| v.storage).or(spec.versions.first()) else {
            continue;
        };
        let probe = format!("ork-gc-probe-{index}");
        let document = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": probe,
                "ownerReferences": [{
                    "apiVersion": format!("{}/{}", spec.group, version.name),
                    "kind": spec.names.kind,
                    "name": "ork-gc-probe-owner",
                    // No object has this uid: the collector finds the owner gone.
                    "uid": "00000000-0000-0000-0000-000000000000",
                }],
            },
        });
        maps.patch(
            &probe,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&document),
        )
        .await
        .map_err(probe_error(name))?;
        probes.push((probe, name.clone()));
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let mut waiting = Vec::new();
        for (probe, name) in &probes {
            if maps.get_opt(probe).await.map_err(probe_error(name))?.is_some() {
                waiting.push(name.clone());
            }
        }
        if waiting.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::NotCollected {
                names: waiting,
                timeout,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
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

/// The CustomResourceDefinitions of every enabled custom CRD of the Katalog: its `crdFile`'s,
/// or one generated from `apiTypes`.
pub fn crd_documents(katalog: &Katalog) -> Result<Vec<Value>, Error> {
    let mut documents = Vec::new();
    for crd in katalog.crds.values().filter(|c| c.entry.enabled) {
        match &crd.entry.crd_file {
            Some(file) => documents.extend(crd_file_documents(crd, file)?),
            None if is_builtin_group(&crd.entry.api_types.group) => continue,
            None => documents.push(generated_crd(crd)),
        }
    }
    Ok(documents)
}

/// Installs every enabled custom CRD of the Katalog and waits until each is Established.
/// Returns the names of the CustomResourceDefinitions applied.
pub async fn install_crds(client: &kube::Client, katalog: &Katalog, timeout: Duration) -> Result<Vec<String>, Error> {
    let api = crate::objects::all::<CustomResourceDefinition>(client.clone());
    let mut installed = Vec::new();
    for document in crd_documents(katalog)? {
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
