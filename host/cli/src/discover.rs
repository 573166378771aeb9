//! Runtimes found in a cluster for the Control Center: the Services labelled
//! `orkestra.io/live-api=true` in the namespaces the operator names (the Helm chart labels
//! its runtime's; `ork dev` registers its own), looked up at every poll. A Service's Live API
//! is `http://<service>.<namespace>.svc:<its http port>`, or the URL its annotation
//! `orkestra.io/live-api-url` gives (a runtime outside the cluster, as `ork dev`'s).
//!
//! A discovered runtime is sent the Control Center's tokens, and anyone who may create a
//! Service in a discovered namespace chooses its annotation: so a runtime is watched only
//! at a URL the operator allowed at start ([`Allowed`]: `--discover-allow`, by default the
//! Services' own names in the discovered namespaces). A Service naming any other URL is
//! passed over, and said so.

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::api::ListParams;
use orkestra_control_center::config::RuntimeConfig;

/// The label that marks a runtime's Live API Service.
pub const LABEL: &str = "orkestra.io/live-api";
/// The annotation that gives its URL when the Service's own name does not reach it.
pub const URL_ANNOTATION: &str = "orkestra.io/live-api-url";

/// The URLs a discovered runtime may have: `scheme://host[:port]`, a host starting `*.`
/// standing for any name under it and a port `*` for any (no port: the scheme's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed(Vec<Pattern>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    scheme: String,
    /// A host, or (`*.svc`) a suffix every host under it matches.
    host: String,
    wildcard: bool,
    /// `None`: any port.
    port: Option<u16>,
}

impl Pattern {
    fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("--discover-allow {text:?}: give scheme://host[:port], as http://*.platform.svc:8080");
        let (scheme, rest) = text.split_once("://").ok_or_else(bad)?;
        if !matches!(scheme, "http" | "https") {
            return Err(bad());
        }
        let rest = rest.trim_end_matches('/');
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, "*")) => (host, None),
            Some((host, port)) => (host, Some(port.parse::<u16>().map_err(|_| bad())?)),
            None => (rest, Some(if scheme == "https" { 443 } else { 80 })),
        };
        let (host, wildcard) = match host.strip_prefix("*.") {
            Some(suffix) => (suffix, true),
            None => (host, false),
        };
        if host.is_empty() || host.contains(['/', '@', '*', '?', '#']) {
            return Err(bad());
        }
        Ok(Self {
            scheme: scheme.into(),
            host: host.to_ascii_lowercase(),
            wildcard,
            port,
        })
    }

    fn matches(&self, url: &reqwest::Url) -> bool {
        let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
            return false;
        };
        let host_matches = match self.wildcard {
            true => host
                .strip_suffix(&self.host)
                .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
            false => host == self.host,
        };
        url.scheme() == self.scheme
            && host_matches
            && self.port.is_none_or(|port| url.port_or_known_default() == Some(port))
            && url.username().is_empty()
    }
}

impl Allowed {
    /// `patterns` (`--discover-allow`), or, when there are none, the Services' own names in
    /// `namespaces` (`*`: every namespace).
    pub fn new(patterns: &[String], namespaces: &[String]) -> Result<Self, String> {
        let defaults: Vec<String> = namespaces
            .iter()
            .map(|ns| match ns.as_str() {
                "*" => "http://*.svc:*".to_string(),
                ns => format!("http://*.{ns}.svc:*"),
            })
            .collect();
        let given = match patterns.is_empty() {
            true => &defaults,
            false => patterns,
        };
        given
            .iter()
            .map(|p| Pattern::parse(p))
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether a discovered runtime may be watched at `url`.
    pub fn admits(&self, url: &str) -> bool {
        reqwest::Url::parse(url).is_ok_and(|url| self.0.iter().any(|p| p.matches(&url)))
    }
}

/// Looks every `period` in `namespaces` (`*`: all) and sends what it finds at a URL `allowed`
/// admits; ends when the Control Center stops listening.
pub async fn discover(
    client: kube::Client,
    (namespaces, allowed): (Vec<String>, Allowed),
    period: Duration,
    found: tokio::sync::watch::Sender<Vec<RuntimeConfig>>,
) {
    let mut passed_over = std::collections::BTreeSet::new();
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut runtimes = Vec::new();
        let mut failed = false;
        for namespace in &namespaces {
            match services(&client, namespace).await {
                Ok(services) => {
                    for runtime in services.iter().filter_map(runtime_of) {
                        if allowed.admits(&runtime.url) {
                            runtimes.push(runtime);
                        } else if passed_over.insert(runtime.url.clone()) {
                            tracing::warn!(runtime = %runtime.name, url = %runtime.url,
                                "a discovered Service names a Live API outside --discover-allow: not watched, sent no token");
                        }
                    }
                }
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
    fn only_urls_the_operator_allowed_are_watched() {
        let default = Allowed::new(&[], &["platform".into()]).unwrap();
        assert!(default.admits("http://ops.platform.svc:8080"));
        assert!(!default.admits("http://catcher.example:8080"), "an annotation's URL");
        assert!(!default.admits("http://ops.other.svc:8080"), "another namespace's");
        assert!(!default.admits("http://platform.svc:8080"), "the suffix alone");
        let given = Allowed::new(
            &["http://127.0.0.1:*".into(), "https://*.example.com".into()],
            &["platform".into()],
        )
        .unwrap();
        assert!(given.admits("http://127.0.0.1:8090"));
        assert!(given.admits("https://rt.example.com"));
        assert!(
            !given.admits("https://rt.example.com:8443"),
            "no port: the scheme's own"
        );
        assert!(!given.admits("https://example.com.evil.io"));
        assert!(!given.admits("http://user@127.0.0.1:8090"));
        assert!(
            !given.admits("http://ops.platform.svc:8080"),
            "the given list replaces the default"
        );
        for bad in ["127.0.0.1", "ftp://x", "http://*", "http://a:b"] {
            assert!(Allowed::new(&[bad.into()], &[]).is_err(), "{bad}");
        }
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
