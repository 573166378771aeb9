//! Replicas of one Katalog sharing its CRs through `coordination.k8s.io` Leases: one
//! elected replica reconciling everything (`leader`), or every live replica reconciling its
//! share (`shard`). The API server is the only arbiter; there is no protocol between
//! replicas besides the Leases they write.

pub mod leader;
pub mod leases;
pub mod members;
pub mod ownership;
pub mod peer;
pub mod ring;

use crate::error::Error;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use orkestra_kube::objects::Objects;
use sha2::Digest;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use ownership::{Claim, Mode, Ownership, View};

/// Labels the member Leases of one Katalog's replicas.
pub const GROUP_LABEL: &str = "orkestra.io/shard-group";
/// The ring a member acts on, on its member Lease.
pub const RING_ANNOTATION: &str = "orkestra.io/ring";
/// Shard mode: the reconciles a member counted on its components' canaries, read by the
/// member that decides rollouts.
pub const COUNTS_ANNOTATION: &str = "orkestra.io/canary-counts";

/// How this replica takes part.
#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    /// Where the Leases live.
    pub namespace: String,
    /// Unique among the replicas (the pod name in a cluster).
    pub identity: String,
    /// The Katalog's name: replicas of one Katalog share one election or one ring.
    pub group: String,
    /// How long a Lease holds without renewal.
    pub duration: Duration,
    /// How often a holder renews and a follower looks again.
    pub renew: Duration,
    /// Where the other replicas reach this one's Live API, named on its Lease so that they
    /// find it gone at once when it dies ([`peer`]); `None`: they wait for its Lease.
    pub advertise: Option<std::net::SocketAddr>,
}

/// client-go's defaults are 15 s and 2 s; 10 s keeps failover of a killed replica under
/// 15 s while tolerating three missed renewals.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
pub const DEFAULT_RENEW: Duration = Duration::from_secs(2);

impl Settings {
    /// A holder acts only this long after its last renewal began: it stops before any other
    /// replica can see its Lease expire.
    fn fence(&self) -> Duration {
        self.duration.saturating_sub(self.duration / 3)
    }

    fn group_name(&self) -> String {
        dns_label(&self.group, "katalog")
    }

    /// `orkestra-konductor-<katalog>`: upstream's Lease name, per Katalog so two Katalogs
    /// in one namespace elect apart.
    pub fn leader_lease(&self) -> String {
        format!("orkestra-konductor-{}", self.group_name())
    }

    /// `orkestra-<katalog>-<identity>`; an identity that had to be cleaned up gets a short
    /// hash of itself, so `Pod-1` and `pod-1` keep apart.
    pub fn member_lease(&self) -> String {
        let label = dns_label(&self.identity, "replica");
        let name = format!("orkestra-{}-{label}", self.group_name());
        if label == self.identity {
            return name;
        }
        format!("{name}-{}", short_hash(&self.identity, 4))
    }

    /// The identity, or why it cannot name a member.
    pub fn check(&self) -> Result<(), Error> {
        if self.identity.trim().is_empty() {
            return Err(Error::Ha("the replica identity is empty (--identity, POD_NAME)".into()));
        }
        if self.identity.contains(',') || self.identity.len() > 128 {
            return Err(Error::Ha(format!(
                "identity {:?}: at most 128 characters and no comma",
                self.identity
            )));
        }
        if self.renew >= self.fence() {
            return Err(Error::Ha(format!(
                "the renew period ({:?}) must be shorter than two thirds of the lease duration ({:?})",
                self.renew, self.duration
            )));
        }
        Ok(())
    }
}

/// The first `bytes` bytes of `text`'s SHA-256, in hex: a name part that tells apart what
/// [`dns_label`] or a length bound would merge.
pub(crate) fn short_hash(text: &str, bytes: usize) -> String {
    let digest = sha2::Sha256::digest(text.as_bytes());
    digest.iter().take(bytes).map(|b| format!("{b:02x}")).collect()
}

/// `text` as lowercase letters, digits and dashes (at most 40), `fallback` when none are
/// left: Lease names and label values accept that much.
pub(crate) fn dns_label(text: &str, fallback: &str) -> String {
    let cleaned: String = text
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let trimmed = cleaned.trim_matches('-');
    let short: String = trimmed.chars().take(40).collect();
    match short.trim_end_matches('-') {
        "" => fallback.to_string(),
        name => name.to_string(),
    }
}

/// The running election or membership of this replica.
pub struct Ha {
    ownership: Ownership,
    /// Whether the other replicas watch this one through its Live API ([`peer`]).
    watched: bool,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Ha {
    /// No Leases: this replica owns everything.
    pub fn none() -> Self {
        Self {
            ownership: Ownership::default(),
            watched: false,
            stop: watch::channel(false).0,
            task: None,
        }
    }

    /// Starts the election or the membership; nothing is owned until a Lease says so.
    pub fn start(client: kube::Client, settings: Settings) -> Result<Self, kube::Error> {
        let ownership = Ownership::new(settings.mode, settings.identity.clone());
        let watched = settings.mode != Mode::None && settings.advertise.is_some();
        let (stop, stopped) = watch::channel(false);
        let api: Objects<Lease> = orkestra_kube::objects::namespaced(client, &settings.namespace)?;
        let task = match settings.mode {
            Mode::None => {
                ownership.set(View::All);
                None
            }
            Mode::Leader => Some(tokio::spawn(leader::run(api, settings, ownership.clone(), stopped))),
            Mode::Shard => Some(tokio::spawn(members::run(api, settings, ownership.clone(), stopped))),
        };
        Ok(Self {
            ownership,
            watched,
            stop,
            task,
        })
    }

    pub fn ownership(&self) -> Ownership {
        self.ownership.clone()
    }

    /// Whether the other replicas watch this one's Live API to learn it died.
    pub fn watched(&self) -> bool {
        self.watched
    }

    /// Gives up every key, waits (at most `within`) for their reconciles, and releases the
    /// Lease at once so another replica takes over without waiting for it to expire.
    pub async fn release(self, within: Duration) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task
            && tokio::time::timeout(within, task).await.is_err()
        {
            tracing::warn!(?within, "the Lease was not released in time; it will expire");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(identity: &str, group: &str) -> Settings {
        Settings {
            mode: Mode::Shard,
            namespace: "default".into(),
            identity: identity.into(),
            group: group.into(),
            duration: DEFAULT_DURATION,
            renew: DEFAULT_RENEW,
            advertise: None,
        }
    }

    #[test]
    fn lease_names_are_valid_whatever_the_identity() {
        let s = settings("Pod_7.host:9", "My Katalog!");
        assert_eq!(s.leader_lease(), "orkestra-konductor-my-katalog");
        assert!(s.member_lease().starts_with("orkestra-my-katalog-pod-7-host-9-"));
        assert_ne!(
            settings("Pod-1", "k").member_lease(),
            settings("pod-1", "k").member_lease()
        );
        assert_eq!(settings("pod-1", "k").member_lease(), "orkestra-k-pod-1");
        assert_eq!(settings("x", "").leader_lease(), "orkestra-konductor-katalog");
        assert!(settings("a,b", "k").check().unwrap_err().to_string().contains("comma"));
        assert!(settings(" ", "k").check().is_err());
        let mut slow = settings("a", "k");
        slow.renew = Duration::from_secs(8);
        assert!(slow.check().unwrap_err().to_string().contains("renew period"));
        assert!(settings("a", "k").check().is_ok());
    }
}
