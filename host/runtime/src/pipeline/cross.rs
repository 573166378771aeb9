//! Cross reads: a CR's templates and gates see CRs of other CRDs of the same runtime as
//! `.cross.<as>` (`found`, `metadata`, `spec`, `status`, `health`, `metrics`), read from the
//! process's own informer caches: zero API calls. A CRD with `crossAccess: false` is never
//! readable. A change to a read CR does not enqueue the reader; its next resync sees it.
//! Reads with `source:` go to another runtime ([`crate::pipeline::cross_remote`]).

use serde_json::{Value, json};

use crate::outcome::health::HealthBoard;
use crate::pipeline::cross_remote::RemoteReads;
use crate::pipeline::roster::{CrdHandle, Roster};
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::Template;
use orkestra_katalog::compile::CrossRead;

/// The CRDs of a runtime, as cross reads see them: the roster's, so a CRD added by a reload
/// is readable at once and a removed one reads as not found.
#[derive(Clone)]
pub struct Peers {
    roster: Roster,
    health: HealthBoard,
    remote: RemoteReads,
}

impl Peers {
    /// Every CRD of the runtime; `http` makes the reads of other runtimes.
    pub fn new(roster: Roster, health: HealthBoard, http: reqwest::Client) -> Self {
        Self {
            roster,
            health,
            remote: RemoteReads::new(http),
        }
    }

    /// A CRD of the runtime, when other CRDs (and runtimes) may read it.
    pub fn readable(&self, crd: &str) -> Option<CrdHandle> {
        self.roster.get(crd).filter(|h| h.crd.cross_access)
    }

    /// The runtime's health board.
    pub fn health(&self) -> &HealthBoard {
        &self.health
    }

    /// `.cross` for one CR: every read under its `as` name.
    pub async fn read_all(&self, reads: &[CrossRead], resolver: &Resolver<'_, '_>, cr_namespace: &str) -> Value {
        let mut entries = serde_json::Map::new();
        for read in reads {
            let value = match &read.remote {
                Some(remote) => self.remote.read(read, remote, resolver).await,
                None => self.read(read, resolver, cr_namespace),
            };
            entries.insert(read.as_.clone(), value);
        }
        Value::Object(entries)
    }

    /// `.metrics` of a CRD, live.
    pub fn live_metrics(&self, peer: &CrdHandle) -> Value {
        crate::pipeline::feedback::live_metrics(&peer.queue, &peer.tuning, &peer.counters)
    }

    /// `.cross.<crd>.metrics` of every readable CRD, live: what autoscale conditions read of
    /// their siblings.
    pub fn all_metrics(&self) -> Value {
        let crds = self.roster.crds().into_iter().filter(|h| h.crd.cross_access);
        Value::Object(
            crds.map(|h| (h.crd.name.to_string(), json!({"metrics": self.live_metrics(&h)})))
                .collect(),
        )
    }

    fn read(&self, read: &CrossRead, resolver: &Resolver<'_, '_>, cr_namespace: &str) -> Value {
        let not_found = json!({"found": false});
        let Some(peer) = self.readable(&read.crd) else {
            return not_found;
        };
        let render = |t: &Option<Template>| t.as_ref().and_then(|t| resolver.render(t).ok());
        let namespace = render(&read.namespace).unwrap_or_else(|| cr_namespace.to_string());
        let key_of = |name: &str| match namespace.is_empty() {
            true => name.to_string(),
            false => format!("{namespace}/{name}"),
        };
        let found = match render(&read.name) {
            Some(name) => peer.cache.get(&key_of(&name)),
            // `strategy: first`: the first match in key order, so the choice is stable.
            None => {
                let mut keys = peer.cache.keys();
                keys.sort();
                let pairs: Vec<String> = read
                    .match_labels
                    .iter()
                    .map(|(k, v)| crate::pipeline::observe::pair_text(k, v))
                    .collect();
                keys.into_iter()
                    .filter_map(|k| peer.cache.get_holding(&k, &pairs))
                    .find(|object| {
                        read.match_labels
                            .iter()
                            .all(|(k, v)| object["metadata"]["labels"][k.as_str()].as_str() == Some(v.as_str()))
                    })
            }
        };
        let Some(object) = found else { return not_found };
        // Health and metrics live, as the peer's runtime knows them now (the peer stamps
        // them on its CRs only if its own Katalog reads them).
        let metrics = self.live_metrics(&peer);
        json!({
            "found": true,
            "metadata": object["metadata"],
            "spec": object["spec"],
            "status": object["status"],
            "health": self.health.get(&read.crd).map(|h| crate::pipeline::feedback::health(&h)),
            "metrics": metrics,
        })
    }
}
