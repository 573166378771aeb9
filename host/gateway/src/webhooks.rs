//! The webhook server (admission rules, protection, conversion), running: its certificate (given, or made and renewed
//! here), the HTTPS listener, and the registration that points the API server at it. A
//! renewal first adds the new CA to the configurations, then presents the new certificate,
//! then drops the old CA, so no review fails in between.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use orkestra_katalog::Compiled;
use orkestra_katalog::model::{CertManager, FailurePolicy};

use crate::admission::{self, Counts};
use crate::provenance::{self, Gateway};
use crate::registration::{self, Endpoint, Registration};
use crate::tls::{self, Identity, Serving};
use crate::{cert_manager, conversion, protection};

/// How long a configuration change is given to reach the API server during a renewal.
const SETTLE: Duration = Duration::from_secs(5);

/// How the webhook server runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub https_addr: SocketAddr,
    /// Where the API server calls; default `https://<https_addr>` (or the Katalog's Service).
    pub url: Option<String>,
    /// The namespace of the gateway's Service, when the Katalog names one.
    pub namespace: String,
    /// A certificate and key to present (and the CA that signed them); else one is made.
    pub cert: Option<(PathBuf, PathBuf, Option<PathBuf>)>,
    /// How long a made certificate is valid; it is renewed a third of the way before.
    pub valid_for: Duration,
}

/// Webhook server errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Tls(#[from] tls::Error),
    #[error("cannot listen on {0} for the webhooks: {1}; --https-addr ADDR picks another address")]
    Listen(SocketAddr, std::io::Error),
    #[error("cannot register the webhooks with the API server: {0}")]
    Register(kube::Error),
    #[error(
        "cannot learn the gateway's own user from the API server (a SelfSubjectReview, Kubernetes 1.28 or later), which guarding the Serve API's provenance needs: {0}"
    )]
    Identity(kube::Error),
    #[error(transparent)]
    CertManager(#[from] cert_manager::Error),
}

impl orkestra_kube::transient::Transient for Error {
    fn is_transient(&self) -> bool {
        matches!(self, Error::Register(error) if error.is_transient())
    }
}

/// The running webhook server.
pub struct Webhooks {
    client: kube::Client,
    compiled: Arc<Compiled>,
    /// The registration as last written (the renewal task changes its CA).
    registration: Arc<parking_lot::Mutex<Registration>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    pub counts: Arc<Counts>,
    pub addr: SocketAddr,
}

impl Webhooks {
    /// Starts serving and registers the webhooks.
    pub async fn start(client: kube::Client, compiled: Arc<Compiled>, options: Options) -> Result<Self, Error> {
        let settings = compiled
            .katalog
            .security
            .as_ref()
            .and_then(|s| s.webhooks.clone())
            .unwrap_or_default();
        let service = settings
            .service_name
            .clone()
            .or_else(|| compiled.katalog.security.as_ref().and_then(|s| s.service_name.clone()));
        let listener = tokio::net::TcpListener::bind(options.https_addr)
            .await
            .map_err(|e| Error::Listen(options.https_addr, e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Listen(options.https_addr, e))?;
        let endpoint = match (&options.url, &service) {
            (Some(url), _) => Endpoint::Url(url.clone()),
            (None, Some(name)) => Endpoint::Service {
                namespace: options.namespace.clone(),
                name: name.clone(),
            },
            (None, None) => Endpoint::Url(format!("https://{addr}")),
        };
        let mut names = vec![addr.ip().to_string(), "localhost".to_string()];
        if let Endpoint::Service { namespace, name } = &endpoint {
            names.extend([
                format!("{name}.{namespace}.svc"),
                format!("{name}.{namespace}.svc.cluster.local"),
            ]);
        }
        if let Some(host) = options.url.as_deref().and_then(host_of) {
            names.push(host);
        }
        let certs = compiled
            .katalog
            .security
            .as_ref()
            .and_then(|s| s.cert_manager.clone())
            .unwrap_or_default();
        let source = CertSource::of(&options, &certs)?;
        let identity = match &source {
            CertSource::Files((cert, key, ca)) => Identity::from_files(cert, key, ca.as_ref())?,
            CertSource::Own { valid_for, .. } => Identity::generate(&names, *valid_for)?,
            CertSource::Issued { secret } => {
                cert_manager::request(&client, &options.namespace, &certs, &names).await?;
                cert_manager::issued(&client, &options.namespace, secret).await?
            }
        };
        let serving = Serving::new(&identity)?;
        let window = compiled
            .katalog
            .security
            .as_ref()
            .and_then(|s| s.conversion.as_ref())
            .and_then(|c| c.conversion_window)
            .map_or(crate::conversion_window::DEFAULT_WINDOW, |n| n as usize);
        let counts = Arc::new(Counts {
            conversions: crate::conversion_window::Window::new(window),
            ..Counts::default()
        });
        let gateway = match Gateway::whoami(&client).await {
            Ok(gateway) => gateway,
            Err(error) if provenance::guarded(&compiled).next().is_some() => return Err(Error::Identity(error)),
            // Nothing to guard: no provenance is read at all without a user to trust.
            Err(_) => Gateway {
                username: String::new(),
            },
        };
        tracing::debug!(user = %gateway.username, "the gateway's own user");
        let gateway = Arc::new(gateway);
        let timeout = Duration::from_secs(u64::from(settings.timeout_seconds.unwrap_or(5).clamp(1, 30)));
        let calls = admission::Calls::within(timeout, Some(client.clone()));
        let router = admission::router(compiled.clone(), counts.clone(), gateway.clone(), calls)
            .merge(provenance::router(compiled.clone(), counts.clone(), gateway))
            .merge(protection::router(compiled.clone(), counts.clone()))
            .merge(conversion::router(compiled.clone(), counts.clone()));
        let router = crate::failpoint::wrap(router, timeout);
        let registration = Registration {
            endpoint,
            ca_bundle: identity.ca_pem.clone(),
            failure_policy: settings.failure_policy.unwrap_or(FailurePolicy::Fail),
            timeout_seconds: settings.timeout_seconds.unwrap_or(5),
        };
        let door = orkestra_net::Door::new("webhooks")
            .limits(orkestra_net::Limits {
                body_limit: admission::BODY_LIMIT,
                ..orkestra_net::Limits::default()
            })
            .tls(tls::acceptor(serving.clone())?);
        let mut tasks = vec![tokio::spawn(async move {
            if let Err(error) = orkestra_net::serve(listener, router, door, std::future::pending()).await {
                tracing::error!(%error, "the webhook server stopped");
            }
        })];
        // A start that fails half way takes back what it registered: left behind, `Fail`
        // webhooks with nobody serving them would refuse every write of the Katalog's kinds.
        let registered = async {
            orkestra_kube::transient::retry("registering the webhooks", || {
                register(&client, &compiled, &registration)
            })
            .await?;
            orkestra_kube::transient::retry("labelling the protected objects", || {
                crate::protection::label_existing(&client, &compiled)
            })
            .await
            .map_err(Error::Register)
        };
        let labelled = match registered.await {
            Ok(labelled) => labelled,
            Err(error) => {
                for task in &tasks {
                    task.abort();
                }
                if let Err(cleanup) = registration::remove_all(&client, &compiled).await {
                    tracing::warn!(error = %cleanup, "removing the webhooks of a failed start failed too");
                }
                return Err(error);
            }
        };
        tracing::info!(%addr, labelled, "admission webhooks serving and registered");
        let shared = Arc::new(parking_lot::Mutex::new(registration.clone()));
        let keeper = Keeper {
            client: client.clone(),
            compiled: compiled.clone(),
            serving,
            registration,
            shared: shared.clone(),
        };
        match source {
            CertSource::Files(_) | CertSource::Own { renew_after: None, .. } => {}
            CertSource::Own {
                valid_for,
                renew_after: Some(after),
            } => tasks.push(tokio::spawn(keeper.renew_own(identity, names, valid_for, after))),
            CertSource::Issued { secret } => {
                let namespace = options.namespace.clone();
                tasks.push(tokio::spawn(keeper.follow_issued(identity, namespace, secret)));
            }
        }
        Ok(Self {
            client,
            compiled,
            registration: shared,
            tasks,
            counts,
            addr,
        })
    }

    /// Stops serving; removes the webhooks of every feature the Katalog does not keep.
    pub async fn stop(self) {
        for task in &self.tasks {
            task.abort();
        }
        let registration = self.registration.lock().clone();
        if let Err(error) = registration::unregister(&self.client, &self.compiled, &registration).await {
            tracing::warn!(%error, "removing the webhook configurations failed");
        }
    }
}

/// Points the API server at the webhooks: the configurations, and the CRDs whose
/// conversion they serve (both carry the CA, so a renewal goes through here too).
async fn register(client: &kube::Client, compiled: &Compiled, registration: &Registration) -> Result<(), Error> {
    registration::register(client, compiled, registration)
        .await
        .map_err(Error::Register)?;
    conversion::point_crds(client, compiled, registration)
        .await
        .map_err(Error::Register)
}

/// Where the webhook server's certificate comes from.
enum CertSource {
    /// `--cert`/`--key` files (and the CA's), as given.
    Files((PathBuf, PathBuf, Option<PathBuf>)),
    /// Made here, valid for `valid_for`, renewed `renew_after` it was made (never: `None`).
    Own {
        valid_for: Duration,
        renew_after: Option<Duration>,
    },
    /// Issued by cert-manager into `secret`.
    Issued { secret: String },
}

impl CertSource {
    fn of(options: &Options, certs: &CertManager) -> Result<Self, Error> {
        if let Some(files) = &options.cert {
            if certs.issuer_ref.is_some() {
                tracing::warn!("--cert is given: it is served, and security.certManager.issuerRef is not asked");
            }
            return Ok(CertSource::Files(files.clone()));
        }
        if certs.issuer_ref.is_some() {
            return Ok(CertSource::Issued {
                secret: cert_manager::secret_name(certs).to_string(),
            });
        }
        let parse = |text: &Option<String>| -> Result<Option<Duration>, Error> {
            text.as_deref()
                .map(orkestra_expr::duration::parse)
                .transpose()
                .map_err(|e| Error::Tls(tls::Error::Generate(e.to_string())))
        };
        let valid_for = parse(&certs.valid_for)?.unwrap_or(options.valid_for);
        // Upstream renews a third of the way before expiry unless told a threshold.
        let threshold = parse(&certs.rotation_threshold)?
            .unwrap_or(valid_for / 3)
            .min(valid_for);
        let renew_after = (certs.auto_rotate != Some(false)).then(|| valid_for - threshold);
        Ok(CertSource::Own { valid_for, renew_after })
    }
}

/// What keeps the served certificate current, and the registration pointing at its CA.
struct Keeper {
    client: kube::Client,
    compiled: Arc<Compiled>,
    serving: Arc<Serving>,
    registration: Registration,
    /// The registration as last written, for [`Webhooks::stop`].
    shared: Arc<parking_lot::Mutex<Registration>>,
}

impl Keeper {
    /// Makes a new certificate every `after`, each valid for `valid_for`.
    async fn renew_own(mut self, mut current: Identity, names: Vec<String>, valid_for: Duration, after: Duration) {
        loop {
            tokio::time::sleep(after).await;
            let next = match Identity::generate(&names, valid_for) {
                Ok(next) => next,
                Err(error) => {
                    tracing::warn!(%error, "making the next webhook certificate failed; retrying");
                    continue;
                }
            };
            match self.move_to(&current, &next).await {
                Ok(()) => current = next,
                Err(error) => tracing::warn!(%error, "renewing the webhook certificate failed; retrying"),
            }
        }
    }

    /// Serves each certificate cert-manager renews into `secret`.
    async fn follow_issued(mut self, mut current: Identity, namespace: String, secret: String) {
        loop {
            tokio::time::sleep(cert_manager::FOLLOW_EVERY).await;
            let next = match cert_manager::current(&self.client, &namespace, &secret).await {
                Ok(Some(next)) if next.cert_pem != current.cert_pem => next,
                Ok(_) => continue,
                Err(error) => {
                    tracing::debug!(%error, "reading the webhook certificate's Secret");
                    continue;
                }
            };
            match self.move_to(&current, &next).await {
                Ok(()) => {
                    tracing::info!(secret = %format!("{namespace}/{secret}"), "serving the certificate cert-manager renewed");
                    current = next;
                }
                Err(error) => tracing::warn!(%error, "moving to the renewed webhook certificate failed; retrying"),
            }
        }
    }

    /// Moves everything from `current` to `next`: both CAs trusted while the API server may
    /// still meet the old certificate, then the new one served, then the old CA dropped.
    async fn move_to(&mut self, current: &Identity, next: &Identity) -> Result<(), Error> {
        self.registration.ca_bundle = format!("{}{}", current.ca_pem, next.ca_pem);
        self.publish().await?;
        // The API server takes in a configuration change within seconds, not at once.
        tokio::time::sleep(SETTLE).await;
        self.serving.replace(next)?;
        tokio::time::sleep(SETTLE).await;
        self.registration.ca_bundle = next.ca_pem.clone();
        self.publish().await?;
        tracing::info!(not_after = ?next.not_after, "webhook certificate renewed");
        Ok(())
    }

    async fn publish(&self) -> Result<(), Error> {
        register(&self.client, &self.compiled, &self.registration).await?;
        *self.shared.lock() = self.registration.clone();
        Ok(())
    }
}

/// The host of `https://host:port/...`.
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    (!host.is_empty()).then(|| host.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_a_webhook_url() {
        assert_eq!(
            super::host_of("https://gw.example:8443/x").as_deref(),
            Some("gw.example")
        );
        assert_eq!(super::host_of("https://[::1]:8443").as_deref(), Some("::1"));
        assert_eq!(super::host_of("https://10.0.0.1").as_deref(), Some("10.0.0.1"));
        assert_eq!(super::host_of("nonsense"), None);
    }

    fn options(valid_for: Duration) -> Options {
        Options {
            https_addr: "127.0.0.1:0".parse().unwrap(),
            url: None,
            namespace: "ns".into(),
            cert: None,
            valid_for,
        }
    }

    fn own(options: &Options, certs: &CertManager) -> (Duration, Option<Duration>) {
        match CertSource::of(options, certs).unwrap() {
            CertSource::Own { valid_for, renew_after } => (valid_for, renew_after),
            _ => panic!("the gateway's own certificate"),
        }
    }

    #[test]
    fn upstream_s_rotation_settings_decide_when_the_own_certificate_is_renewed() {
        let hour = Duration::from_secs(3600);
        let defaults = own(&options(3 * hour), &CertManager::default());
        assert_eq!(defaults, (3 * hour, Some(2 * hour)), "a third of the way before expiry");
        let set = CertManager {
            valid_for: Some("2y".into()),
            rotation_threshold: Some("30d".into()),
            ..CertManager::default()
        };
        let (valid_for, after) = own(&options(hour), &set);
        assert_eq!(valid_for, Duration::from_secs(2 * 365 * 86_400));
        assert_eq!(after, Some(valid_for - Duration::from_secs(30 * 86_400)));
        let off = CertManager {
            auto_rotate: Some(false),
            ..CertManager::default()
        };
        assert_eq!(own(&options(hour), &off), (hour, None), "autoRotate: false");
        let issued = CertManager {
            issuer_ref: Some(orkestra_katalog::model::IssuerRef {
                name: "ca".into(),
                ..Default::default()
            }),
            ..CertManager::default()
        };
        assert!(matches!(
            CertSource::of(&options(hour), &issued).unwrap(),
            CertSource::Issued { secret } if secret == cert_manager::DEFAULT_SECRET
        ));
    }
}
