//! `enrich`: after the children are applied, what the Katalog asks to know about them is
//! read from the API server and embedded on each child in `.children` (`_pods`,
//! `_warnings`, ...), for status fields and notes. Best effort: a read that fails is logged
//! and leaves its key out; the reconcile goes on. Every read is bounded (a list carries a
//! limit, a StatefulSet's claims are looked up by name for at most [`MAX_ORDINALS`] pods),
//! and what is embedded is trimmed to what notes read (no managed fields; of a TLS Secret
//! only its name, type and keys, never its data).

use kube::api::{DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_kube::objects::Objects;
use serde_json::{Map, Value, json};

use super::Declarative;
use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::enrich::{Enrichment, Target};

/// At most this many objects of a list are embedded.
const LIST_LIMIT: u32 = 100;
/// Jobs scanned for a CronJob's latest ones.
const JOB_SCAN: u32 = 500;
/// StatefulSet ordinals whose claims are looked up.
const MAX_ORDINALS: i64 = 50;
/// TLS Secrets of an Ingress looked up.
const MAX_TLS_SECRETS: usize = 10;

impl Declarative {
    /// Embeds every passing enrichment on the children it applies to. `resolver` sees the CR
    /// and `.children` as applied.
    pub(super) async fn enrich(&self, children: &mut Map<String, Value>, resolver: &Resolver<'_, '_>) {
        let enrichments: Vec<&Enrichment> = self
            .crd
            .enrich
            .iter()
            .filter(|e| e.conditions.passes(resolver, None))
            .collect();
        if enrichments.is_empty() {
            return;
        }
        for child in children.values_mut() {
            let kind = child["kind"].as_str().unwrap_or_default().to_string();
            for enrichment in enrichments.iter().filter(|e| e.target.applies_to(&kind)) {
                match self.read(enrichment.target, child).await {
                    Ok(found) => {
                        for (key, value) in found {
                            child[key] = value;
                        }
                    }
                    Err(error) => tracing::warn!(
                        target = enrichment.target.name(), %kind,
                        child = %child["metadata"]["name"], %error, "enrichment skipped"
                    ),
                }
            }
        }
    }

    /// What `target` embeds on `child`, by key.
    async fn read(&self, target: Target, child: &Value) -> Result<Vec<(&'static str, Value)>, kube::Error> {
        let namespace = child["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = child["metadata"]["name"].as_str().unwrap_or_default();
        Ok(match target {
            Target::Pods => {
                let selector = label_selector(&child["spec"]["selector"]);
                let pods = match selector {
                    Some(selector) => self.list("", "v1", "Pod", namespace, &selector).await?,
                    None => Vec::new(),
                };
                vec![("_pods", Value::Array(pods))]
            }
            Target::BackingPods => {
                let selector = label_selector(&json!({"matchLabels": child["spec"]["selector"]}));
                let pods = match selector {
                    Some(selector) => self.list("", "v1", "Pod", namespace, &selector).await?,
                    None => Vec::new(),
                };
                vec![("_backingPods", Value::Array(pods))]
            }
            Target::Warnings => {
                let uid = child["metadata"]["uid"].as_str().unwrap_or_default();
                let api = self.kind_api("", "v1", "Event", namespace)?;
                let params = ListParams::default()
                    .fields(&format!("involvedObject.uid={uid},type=Warning"))
                    .limit(LIST_LIMIT);
                let mut events: Vec<Value> = api
                    .list(&params)
                    .await?
                    .items
                    .into_iter()
                    .map(|event| {
                        let data = &event.data;
                        let last = data["lastTimestamp"].clone();
                        json!({
                            "reason": data["reason"], "message": data["message"], "count": data["count"],
                            "lastTimestamp": if last.is_null() { data["eventTime"].clone() } else { last },
                        })
                    })
                    .collect();
                // Newest first, as a status reading "the first warning" expects.
                events.sort_by(|a, b| b["lastTimestamp"].as_str().cmp(&a["lastTimestamp"].as_str()));
                vec![("_warnings", Value::Array(events))]
            }
            Target::Owner => {
                let owners = child["metadata"]["ownerReferences"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let owner = owners.iter().find(|o| o["controller"] == true).or(owners.first());
                let owner = owner.map_or(
                    Value::Null,
                    |o| json!({"name": o["name"], "kind": o["kind"], "uid": o["uid"]}),
                );
                vec![("_owner", owner)]
            }
            Target::ReplicaSets => {
                let uid = child["metadata"]["uid"].clone();
                let sets = match label_selector(&child["spec"]["selector"]) {
                    Some(selector) => self.list("apps", "v1", "ReplicaSet", namespace, &selector).await?,
                    None => Vec::new(),
                };
                let owned = sets
                    .into_iter()
                    .filter(|set| {
                        let owners = set["metadata"]["ownerReferences"].as_array();
                        owners.is_some_and(|o| o.iter().any(|o| o["uid"] == uid))
                    })
                    .collect();
                vec![("_replicaSets", Value::Array(owned))]
            }
            Target::Pvcs => {
                let replicas = child["spec"]["replicas"].as_i64().unwrap_or(1).clamp(0, MAX_ORDINALS);
                let api = self.kind_api("", "v1", "PersistentVolumeClaim", namespace)?;
                let mut claims = Vec::new();
                for template in child["spec"]["volumeClaimTemplates"].as_array().into_iter().flatten() {
                    let claim = template["metadata"]["name"].as_str().unwrap_or_default();
                    for ordinal in 0..replicas {
                        if let Some(found) = api.get_opt(&format!("{claim}-{name}-{ordinal}")).await? {
                            claims.push(trimmed(found));
                        }
                    }
                }
                vec![("_pvcs", Value::Array(claims))]
            }
            Target::BoundVolume => {
                let volume = child["spec"]["volumeName"].as_str().unwrap_or_default();
                vec![("_pv", self.get("", "v1", "PersistentVolume", "", volume).await?)]
            }
            Target::BoundClaim => {
                let claim = &child["spec"]["claimRef"];
                let (claim_ns, claim_name) = (
                    claim["namespace"].as_str().unwrap_or_default(),
                    claim["name"].as_str().unwrap_or_default(),
                );
                let found = match claim_ns.is_empty() {
                    true => Value::Null,
                    false => {
                        self.get("", "v1", "PersistentVolumeClaim", claim_ns, claim_name)
                            .await?
                    }
                };
                vec![("_pvc", found)]
            }
            Target::StorageClass => {
                let class = child["spec"]["storageClassName"].as_str().unwrap_or_default();
                vec![(
                    "_storageClass",
                    self.get("storage.k8s.io", "v1", "StorageClass", "", class).await?,
                )]
            }
            Target::Endpoints => {
                let selector = format!("kubernetes.io/service-name={name}");
                let slices = self
                    .list("discovery.k8s.io", "v1", "EndpointSlice", namespace, &selector)
                    .await?;
                vec![("_endpoints", Value::Array(slices.iter().flat_map(endpoints).collect()))]
            }
            Target::Node => {
                let node = child["spec"]["nodeName"].as_str().unwrap_or_default();
                let found = self.get("", "v1", "Node", "", node).await?;
                let labels = &found["metadata"]["labels"];
                let topology = match found.is_null() {
                    true => Value::Null,
                    false => json!({
                        "name": node,
                        "zone": labels["topology.kubernetes.io/zone"],
                        "region": labels["topology.kubernetes.io/region"],
                        "instanceType": labels["node.kubernetes.io/instance-type"],
                    }),
                };
                vec![("_node", topology)]
            }
            Target::Hpa => vec![
                (
                    "_currentMetrics",
                    child["status"]["currentMetrics"]
                        .as_array()
                        .map_or(json!([]), |m| json!(m)),
                ),
                ("_scaleTarget", child["spec"]["scaleTargetRef"].clone()),
            ],
            Target::CronJob => {
                let uid = child["metadata"]["uid"].clone();
                let api = self.kind_api("batch", "v1", "Job", namespace)?;
                let jobs = api.list(&ListParams::default().limit(JOB_SCAN)).await?.items;
                let mut owned: Vec<Value> = jobs
                    .into_iter()
                    .map(trimmed)
                    .filter(|job| {
                        let owners = job["metadata"]["ownerReferences"].as_array();
                        owners.is_some_and(|o| o.iter().any(|o| o["uid"] == uid))
                    })
                    .collect();
                owned.sort_by(|a, b| {
                    let start = |job: &Value| job["status"]["startTime"].as_str().unwrap_or_default().to_string();
                    start(b).cmp(&start(a))
                });
                let succeeded = owned
                    .iter()
                    .find(|job| job["status"]["succeeded"].as_i64().unwrap_or(0) > 0)
                    .cloned();
                vec![
                    (
                        "_activeJobs",
                        child["status"]["active"].as_array().map_or(json!([]), |a| json!(a)),
                    ),
                    ("_lastJob", owned.first().cloned().unwrap_or(Value::Null)),
                    ("_lastSuccessfulJob", succeeded.unwrap_or(Value::Null)),
                ]
            }
            Target::Ingress => {
                let balancers = child["status"]["loadBalancer"]["ingress"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let addresses: Vec<Value> = balancers
                    .iter()
                    .flat_map(|b| [b["ip"].clone(), b["hostname"].clone()])
                    .filter(|a| a.is_string())
                    .collect();
                let api = self.kind_api("", "v1", "Secret", namespace)?;
                let mut secrets = Vec::new();
                let tls = child["spec"]["tls"].as_array().cloned().unwrap_or_default();
                for secret in tls
                    .iter()
                    .filter_map(|t| t["secretName"].as_str())
                    .take(MAX_TLS_SECRETS)
                {
                    if let Some(found) = api.get_opt(secret).await? {
                        let keys: Vec<&String> = found.data["data"]
                            .as_object()
                            .map(|d| d.keys().collect())
                            .unwrap_or_default();
                        secrets.push(json!({
                            "metadata": {"name": secret, "namespace": namespace},
                            "type": found.data["type"], "keys": keys,
                        }));
                    }
                }
                vec![
                    ("_loadBalancerIPs", Value::Array(addresses)),
                    ("_tlsSecrets", Value::Array(secrets)),
                ]
            }
        })
    }

    fn kind_api(
        &self,
        group: &str,
        version: &str,
        kind: &str,
        namespace: &str,
    ) -> Result<Objects<DynamicObject>, kube::Error> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        Objects::within(
            self.client.clone(),
            Some(namespace).filter(|n| !n.is_empty()),
            &resource,
        )
    }

    /// Up to [`LIST_LIMIT`] objects matching `selector`, trimmed.
    async fn list(
        &self,
        group: &str,
        version: &str,
        kind: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Value>, kube::Error> {
        let params = ListParams::default().labels(selector).limit(LIST_LIMIT);
        let found = self.kind_api(group, version, kind, namespace)?.list(&params).await?;
        Ok(found.items.into_iter().map(trimmed).collect())
    }

    /// One object, trimmed; null when the name is empty or nothing has it.
    async fn get(
        &self,
        group: &str,
        version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, kube::Error> {
        if name.is_empty() {
            return Ok(Value::Null);
        }
        let found = self.kind_api(group, version, kind, namespace)?.get_opt(name).await?;
        Ok(found.map_or(Value::Null, trimmed))
    }
}

/// An object as JSON, without its managed fields.
fn trimmed(object: DynamicObject) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(metadata) = value["metadata"].as_object_mut() {
        metadata.remove("managedFields");
    }
    value
}

/// A label selector (`matchLabels` and `matchExpressions`) as the API server's query text;
/// `None` for one that selects nothing to look for.
fn label_selector(selector: &Value) -> Option<String> {
    let mut terms: Vec<String> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for expression in selector["matchExpressions"].as_array().into_iter().flatten() {
        let key = expression["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        terms.push(match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        });
    }
    (!terms.is_empty()).then(|| terms.join(","))
}

/// The endpoints of one EndpointSlice as `{ip, port, ready}`.
fn endpoints(slice: &Value) -> Vec<Value> {
    let port = slice["ports"][0]["port"].clone();
    slice["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|endpoint| {
            let ready = endpoint["conditions"]["ready"].as_bool().unwrap_or(true);
            let port = port.clone();
            endpoint["addresses"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |ip| json!({"ip": ip, "port": port, "ready": ready}))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_become_query_text_and_an_empty_one_none() {
        let selector = json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ]});
        assert_eq!(
            label_selector(&selector).as_deref(),
            Some("app=web,tier in (a,b),!canary")
        );
        assert_eq!(label_selector(&json!({})), None);
        assert_eq!(label_selector(&Value::Null), None);
    }

    #[test]
    fn endpoint_slices_flatten_to_addresses_with_their_readiness() {
        let slice = json!({"ports": [{"port": 8080}], "endpoints": [
            {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
        ]});
        assert_eq!(
            endpoints(&slice),
            vec![
                json!({"ip": "10.0.0.1", "port": 8080, "ready": true}),
                json!({"ip": "10.0.0.2", "port": 8080, "ready": false})
            ]
        );
    }
}
