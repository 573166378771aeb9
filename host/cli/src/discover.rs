//! Runtimes found in a cluster for the Control Center: the Services labelled
//! `orkestra.io/live-api=true` in the namespaces the operator names (the Helm chart labels
//! its runtime's; `ork dev` registers its own), looked up at every poll. A Service's Live API
//! is `http://<service>.<namespace>.svc:<its http port>`, or the URL its annotation
//! `orkestra.io/live-api-url` gives (a runtime outside the cluster, as `ork dev`'s).

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::api::ListParams;
use orkestra_control_center::config::RuntimeConfig;

/// The label that marks a runtime's Live API Service.
pub const LABEL: &str = "orkestra.io/live-api";
/// The annotation that gives its URL when the Service's own name does not reach it.
pub const URL_ANNOTATION: &str = "orkestra.io/live-api-url";

/// Looks every `period` in `namespaces` (`*`: all) and sends what it finds; ends when the
/// Control Center stops listening.
pub async fn discover(
    client: kube::Client,
    namespaces: Vec<String>,
    period: Duration,
    found: tokio::sync::watch::Sender<Vec<RuntimeConfig>>,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut runtimes = Vec::new();
        let mut failed = false;
        for namespace in &namespaces {
            match services(&client, namespace).await {
                Ok(services) => runtimes.extend(services.iter().filter_map(runtime_of)),
                Err(error) => {
                    tracing::warn!(%namespace, %error, "cannot list the runtimes' Services; keeping what was found");
                    failed = true;
                }
            }
        }
        // A failed look keeps the runtimes already found rather than dropping them.
        if !failed && found.send(runtimes).is_err() {
            return;
        }
    }
}

async fn services(client: &kube::Client, namespace: &str) -> Result<Vec<Service>, kube::Error> {
    let selector = ListParams::default().labels(&format!("{LABEL}=true"));
    let listed = match namespace {
        "*" => {
            orkestra_kube::objects::all::<Service>(client.clone())
                .list(&selector)
                .await?
        }
        namespace => {
            orkestra_kube::objects::namespaced::<Service>(client.clone(), namespace)?
                .list(&selector)
                .await?
        }
    };
    Ok(listed.items)
}

/// The runtime a Service stands for: named `<namespace>-<service>`.
fn runtime_of(service: &Service) -> Option<RuntimeConfig> {
    let (name, namespace) = (
        service.metadata.name.as_deref()?,
        service.metadata.namespace.as_deref()?,
    );
    let annotated = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(URL_ANNOTATION));
    let url = match annotated {
        Some(url) => url.clone(),
        None => {
            let ports = service.spec.as_ref()?.ports.as_ref()?;
            let port = ports
                .iter()
                .find(|p| p.name.as_deref() == Some("http"))
                .or(ports.first())?;
            format!("http://{name}.{namespace}.svc:{}", port.port)
        }
    };
    match RuntimeConfig::new(&url, Some(&format!("{namespace}-{name}")), None) {
        Ok(config) => Some(config),
        Err(error) => {
            tracing::warn!(service = %format!("{namespace}/{name}"), %error, "a labelled Service names no usable Live API");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(annotation: Option<&str>, ports: serde_json::Value) -> Service {
        let mut metadata = serde_json::json!({"name": "ops", "namespace": "platform", "labels": {LABEL: "true"}});
        if let Some(url) = annotation {
            metadata["annotations"] = serde_json::json!({URL_ANNOTATION: url});
        }
        serde_json::from_value(serde_json::json!({"metadata": metadata, "spec": {"ports": ports}})).unwrap()
    }

    #[test]
    fn a_service_stands_for_its_http_port_or_the_url_it_is_annotated_with() {
        let ports = serde_json::json!([{"name": "webhooks", "port": 443}, {"name": "http", "port": 8080}]);
        let found = runtime_of(&service(None, ports.clone())).unwrap();
        assert_eq!(
            (found.name.as_str(), found.url.as_str()),
            ("platform-ops", "http://ops.platform.svc:8080")
        );
        let annotated = runtime_of(&service(Some("http://127.0.0.1:8090"), ports)).unwrap();
        assert_eq!(annotated.url, "http://127.0.0.1:8090");
        assert!(runtime_of(&service(Some("file:///etc/passwd"), serde_json::json!([]))).is_none());
        assert!(runtime_of(&service(None, serde_json::json!([]))).is_none(), "no port");
    }
}
