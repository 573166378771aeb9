//! API requests per namespace: a token bucket for each namespace the rules give a rate, in
//! front of the API client every part of the runtime shares (reconciles, components' kube
//! calls, the identities components act as). A request over its tenant's rate waits for its
//! token before it is sent, so a tenant's flood slows that tenant only: the API server sees
//! all of the runtime's requests as one user, so it cannot tell tenants apart.
//!
//! A request is charged to the tenant whose custom resource caused it (the reconcile's task
//! says so, [`orkestra_kube::tenant`]), whatever namespace its URL names: a CR of `team-a`
//! writing into `team-b` spends `team-a`'s rate, never `team-b`'s. Requests of no reconcile
//! are charged to the namespace in their path.
//!
//! Left alone: watches (long-lived streams, one per CRD and kind, no tenant's doing) and
//! requests of no tenant outside any namespace (cluster-scoped objects, discovery).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::Tenants;
use crate::outcome::budget::{Bucket, Rate};

/// Namespaces whose waits are counted for `/metrics` and the Live API (the one that waited
/// least is forgotten first).
const COUNTED: usize = 256;
/// Buckets kept before the full ones (of namespaces quiet long enough) are forgotten.
const KEPT: usize = 1024;

/// What one namespace's requests waited for its rate.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Waited {
    /// Requests that waited.
    pub requests: u64,
    /// For how long, in all.
    pub seconds: f64,
}

/// The buckets of the namespaces with a rate, and what their requests waited.
#[derive(Debug, Default)]
pub(super) struct Buckets {
    buckets: Mutex<HashMap<String, Bucket>>,
    waited: Mutex<HashMap<String, Waited>>,
}

impl Buckets {
    /// Forgets every bucket (new rules start them full).
    pub(super) fn forget(&self) {
        self.buckets.lock().clear();
    }
}

impl Tenants {
    /// `client`, its requests held to their namespace's rate.
    pub fn limit(self: &Arc<Self>, client: kube::Client) -> kube::Client {
        let default_namespace = client.default_namespace().to_string();
        let tenants = self.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (tenants, client) = (tenants.clone(), client.clone());
            async move {
                if !watch(request.uri()) {
                    let tenant = orkestra_kube::tenant::current();
                    if let Some(charged) = tenant.as_deref().or_else(|| namespace_of(request.uri())) {
                        tenants.api_turn(charged).await;
                    }
                }
                client.send(request).await
            }
        });
        kube::Client::new(service, default_namespace)
    }

    /// Waits for a token of `namespace`'s bucket, if the rules give it a rate.
    async fn api_turn(&self, namespace: &str) {
        let wait = self.reserve(namespace, Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Takes a token of `namespace`'s bucket: how long to wait before using it.
    fn reserve(&self, namespace: &str, now: Instant) -> Duration {
        let Some(rate) = self.rules().of(namespace).api else {
            return Duration::ZERO;
        };
        let rate = Rate {
            burst: rate.burst,
            per_second: rate.qps,
        };
        let wait = {
            let mut buckets = self.api.buckets.lock();
            if buckets.len() >= KEPT && !buckets.contains_key(namespace) {
                buckets.retain(|_, bucket| !bucket.is_full(rate, now));
            }
            buckets
                .entry(namespace.to_string())
                .or_insert_with(|| Bucket::full(rate, now))
                .reserve(rate, now)
        };
        if !wait.is_zero() {
            let mut waited = self.api.waited.lock();
            if waited.len() >= COUNTED && !waited.contains_key(namespace) {
                let least = waited.iter().min_by_key(|(_, w)| w.requests).map(|(n, _)| n.clone());
                least.map(|n| waited.remove(&n));
            }
            let entry = waited.entry(namespace.to_string()).or_default();
            entry.requests += 1;
            entry.seconds += wait.as_secs_f64();
        }
        wait
    }

    /// What each namespace's requests waited for its rate, most first.
    pub fn api_waits(&self) -> Vec<(String, Waited)> {
        let waited = self.api.waited.lock();
        let mut waits: Vec<(String, Waited)> = waited.iter().map(|(n, w)| (n.clone(), *w)).collect();
        waits.sort_by(|a, b| b.1.requests.cmp(&a.1.requests).then(a.0.cmp(&b.0)));
        waits
    }
}

/// Whether a request is a watch.
pub(crate) fn watch(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|pair| pair == "watch=true" || pair == "watch=1"))
}

/// The namespace in a request's path, if any (`/api/v1/namespaces/NS/...`,
/// `/apis/GROUP/VERSION/namespaces/NS/...`).
fn namespace_of(uri: &http::Uri) -> Option<&str> {
    let mut segments = uri.path().trim_start_matches('/').split('/');
    let skip = match segments.next()? {
        "api" => 1,
        "apis" => 2,
        _ => return None,
    };
    let mut segments = segments.skip(skip);
    (segments.next()? == "namespaces")
        .then(|| segments.next())
        .flatten()
        .filter(|namespace| !namespace.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use orkestra_katalog::compile::{ApiRate, TenantLimits, TenantRules};

    #[test]
    fn requests_are_held_to_the_namespace_in_their_path_and_watches_are_not() {
        let namespace = |uri: &str| {
            let uri: http::Uri = uri.parse().unwrap();
            (!watch(&uri)).then(|| namespace_of(&uri)).flatten().map(str::to_string)
        };
        assert_eq!(
            namespace("/api/v1/namespaces/team-a/configmaps/x").as_deref(),
            Some("team-a")
        );
        assert_eq!(
            namespace("/apis/example.com/v1/namespaces/team-b/websites/w/status?fieldManager=x").as_deref(),
            Some("team-b")
        );
        assert_eq!(
            namespace("/apis/example.com/v1/namespaces/team-b/websites?watch=true&rv=1"),
            None
        );
        assert_eq!(namespace("/apis/example.com/v1/websites"), None, "every namespace");
        assert_eq!(namespace("/api/v1/nodes/n1"), None, "cluster-scoped");
        assert_eq!(namespace("/version"), None);
    }

    #[test]
    fn a_namespace_over_its_rate_waits_in_turn_and_another_does_not() {
        let limits = TenantLimits {
            reconciles: 1,
            api: None,
            wasm_calls: 16,
            wasm_cpu: 0.5,
        };
        let limited = TenantLimits {
            api: Some(ApiRate { qps: 10.0, burst: 3.0 }),
            ..limits
        };
        let tenants = Tenants::new(TenantRules {
            default: limits,
            namespaces: [("noisy".to_string(), limited)].into(),
        });
        let now = Instant::now();
        let waits: Vec<Duration> = (0..6).map(|_| tenants.reserve("noisy", now)).collect();
        // The burst at once, then one each tenth of a second, each after the one before.
        assert_eq!(waits[..3], [Duration::ZERO; 3]);
        for (i, wait) in waits[3..].iter().enumerate() {
            let wanted = 0.1 * (i + 1) as f64;
            assert!((wait.as_secs_f64() - wanted).abs() < 1e-6, "{wait:?} for {wanted}");
        }
        assert_eq!(tenants.reserve("quiet", now), Duration::ZERO, "no rate: never waits");
        // A second later the debt is paid and a token earned again.
        assert!(tenants.reserve("noisy", now + Duration::from_secs(1)) < Duration::from_millis(1));
        let waits = tenants.api_waits();
        assert_eq!(waits.len(), 1);
        assert_eq!((waits[0].0.as_str(), waits[0].1.requests), ("noisy", 3));
    }
}
