//! The runtime's own list pages, a few at a time. Each watch lists what it watches when it
//! starts, in pages of 500, and a runtime starts every watch at once: 20 CRDs over 50,000
//! CRs are a hundred pages the API server encodes side by side. While it does, every small
//! request (a new CR's first reconcile, the status it writes) shares the API server's CPU
//! with all of them and waits. Held to a few pages at a time, the lists take about as long
//! in all (what they cost is the API server's CPU either way), and a reconcile's request
//! waits behind a few.
//!
//! Only the runtime's own pages wait here: a request made for a tenant (a reconcile's own
//! list, a component's) is never held behind another's.

use std::sync::Arc;

use http_body_util::BodyExt;
use tokio::sync::Semaphore;

/// List pages the runtime's watches fetch at once.
const PAGES_AT_ONCE: usize = 4;

/// `client`, the runtime's list pages fetched [`PAGES_AT_ONCE`] at a time, first asked first
/// served. A page's turn lasts until its body is read: the API server encodes it while it
/// sends it.
pub fn paced(client: kube::Client) -> kube::Client {
    let default_namespace = client.default_namespace().to_string();
    let turns = Arc::new(Semaphore::new(PAGES_AT_ONCE));
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (turns, client) = (turns.clone(), client.clone());
        async move {
            if !own_list_page(&request) {
                return client.send(request).await;
            }
            // The semaphore is never closed: a turn always comes.
            let _turn = turns.acquire_owned().await.ok();
            let (parts, body) = client.send(request).await?.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok(http::Response::from_parts(parts, kube::client::Body::from(body)))
        }
    });
    kube::Client::new(service, default_namespace)
}

/// Whether a request is a page of a list the runtime makes for itself: a GET with a `limit`,
/// not a watch, outside any tenant's work.
fn own_list_page(request: &http::Request<kube::client::Body>) -> bool {
    let uri = request.uri();
    request.method() == http::Method::GET
        && !crate::tenants::api::watch(uri)
        && uri
            .query()
            .is_some_and(|query| query.split('&').any(|pair| pair.starts_with("limit=")))
        && orkestra_kube::tenant::current().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(uri: &str) -> http::Request<kube::client::Body> {
        http::Request::get(uri)
            .body(kube::client::Body::from(Vec::new()))
            .unwrap()
    }

    #[tokio::test]
    async fn only_the_runtime_s_own_list_pages_take_a_turn() {
        let page = "/apis/x.io/v1/namespaces/a/apps?limit=500&continue=abc";
        assert!(own_list_page(&get(page)));
        assert!(own_list_page(&get("/api/v1/configmaps?labelSelector=a%3Db&limit=500")));
        for other in [
            "/apis/x.io/v1/namespaces/a/apps/blog",
            "/apis/x.io/v1/namespaces/a/apps?labelSelector=a%3Db",
            "/apis/x.io/v1/namespaces/a/apps?limit=500&watch=true&resourceVersion=7",
        ] {
            assert!(!own_list_page(&get(other)), "{other}");
        }
        let mut patch = get(page);
        *patch.method_mut() = http::Method::PATCH;
        assert!(!own_list_page(&patch));
        let tenant = orkestra_kube::tenant::scope("team-a".into(), async { own_list_page(&get(page)) }).await;
        assert!(!tenant, "a tenant's list never waits behind the runtime's");
    }

    #[tokio::test(start_paused = true)]
    async fn list_pages_go_a_few_at_a_time_and_other_requests_pass_them() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        // Stands in for the connection: each request takes a while and answers with a body.
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let wire = {
            let (now, most) = (now.clone(), most.clone());
            tower::service_fn(move |request: http::Request<kube::client::Body>| {
                let (now, most) = (now.clone(), most.clone());
                async move {
                    let paged = request.uri().query().is_some();
                    if paged {
                        most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    if paged {
                        now.fetch_sub(1, Ordering::SeqCst);
                    }
                    Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::from(b"{}".to_vec())))
                }
            })
        };
        let client = paced(kube::Client::new(wire, "default"));
        let started = tokio::time::Instant::now();
        let pages = (0..PAGES_AT_ONCE * 2).map(|_| client.send(get("/api/v1/configmaps?limit=500")));
        let single = async {
            let sent = tokio::time::Instant::now();
            client.send(get("/api/v1/namespaces/a/configmaps/one")).await.unwrap();
            sent.elapsed()
        };
        let (pages, single) = tokio::join!(futures::future::join_all(pages), single);
        assert!(pages.iter().all(Result::is_ok));
        assert_eq!(most.load(Ordering::SeqCst), PAGES_AT_ONCE, "never more pages at once");
        assert_eq!(
            started.elapsed(),
            std::time::Duration::from_millis(40),
            "two rounds of pages"
        );
        assert_eq!(
            single,
            std::time::Duration::from_millis(20),
            "a GET of one object never waits for the pages"
        );
    }
}
