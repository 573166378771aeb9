//! A kube client that keeps a tally of the requests it sends (method and path): what one
//! client asked of the API server, with no other client's requests mixed in.

use std::sync::{Arc, Mutex};

use anyhow::Context;
use kube::client::ClientBuilder;
use tower::util::MapRequestLayer;

/// One request as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub method: http::Method,
    /// The path, without the query.
    pub path: String,
}

/// The requests a [`counting_client`] sent, in order.
#[derive(Debug, Default)]
pub struct Tally {
    sent: Mutex<Vec<Sent>>,
}

impl Tally {
    pub fn sent(&self) -> Vec<Sent> {
        self.sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The requests of `method` to a path ending in `suffix`.
    pub fn count(&self, method: &http::Method, suffix: &str) -> usize {
        self.sent()
            .iter()
            .filter(|sent| sent.method == method && sent.path.ends_with(suffix))
            .count()
    }
}

/// A client for the shared control plane that records every request it sends in the tally.
pub async fn counting_client() -> anyhow::Result<(kube::Client, Arc<Tally>)> {
    let cluster = crate::cluster()?;
    let config = orkestra_control_plane::config_for(&cluster.kubeconfig).await?;
    let tally = Arc::new(Tally::default());
    let record = tally.clone();
    let layer = MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
        record
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Sent {
                method: request.method().clone(),
                path: request.uri().path().to_string(),
            });
        request
    });
    let client = ClientBuilder::try_from(config)
        .context("a client for the test control plane")?
        .with_layer(&layer)
        .build();
    Ok((client, tally))
}
