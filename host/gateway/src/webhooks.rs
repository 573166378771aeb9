//! The webhook server (admission rules, protection, conversion), running: its certificate (given, or made and renewed
//! here), the HTTPS listener, and the registration that points the API server at it. A
//! renewal first adds the new CA to the configurations, then presents the new certificate,
//! then drops the old CA, so no review fails in between.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use orkestra_katalog::Compiled;
use orkestra_katalog::model::FailurePolicy;

use crate::admission::{self, Counts};
use crate::provenance::{self, Gateway};
use crate::registration::{self, Endpoint, Registration};
use crate::tls::{self, Identity, Serving};
use crate::{conversion, protection};

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
    registration: Arc<std::sync::Mutex<Registration>>,
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
        let identity = match &options.cert {
            Some((cert, key, ca)) => Identity::from_files(cert, key, ca.as_ref())?,
            None => Identity::generate(&names, options.valid_for)?,
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
        let shared = Arc::new(std::sync::Mutex::new(registration.clone()));
        if options.cert.is_none() {
            let client = client.clone();
            let compiled = compiled.clone();
            let shared = shared.clone();
            let mut registration = registration;
            tasks.push(tokio::spawn(async move {
                let mut current = identity;
                loop {
                    tokio::time::sleep(options.valid_for * 2 / 3).await;
                    match renew(
                        &client,
                        &compiled,
                        &serving,
                        &mut registration,
                        &current,
                        &names,
                        options.valid_for,
                    )
                    .await
                    {
                        Ok(next) => current = next,
                        Err(error) => tracing::warn!(%error, "renewing the webhook certificate failed; retrying"),
                    }
                    *shared.lock().unwrap_or_else(|e| e.into_inner()) = registration.clone();
                }
            }));
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
        let registration = self.registration.lock().unwrap_or_else(|e| e.into_inner()).clone();
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

/// Makes a new CA and certificate and moves everything to them.
async fn renew(
    client: &kube::Client,
    compiled: &Compiled,
    serving: &Serving,
    registration: &mut Registration,
    current: &Identity,
    names: &[String],
    valid_for: Duration,
) -> Result<Identity, Error> {
    let next = Identity::generate(names, valid_for)?;
    // Both CAs while the API server may still meet the old certificate.
    registration.ca_bundle = format!("{}{}", current.ca_pem, next.ca_pem);
    register(client, compiled, registration).await?;
    // The API server takes in a configuration change within seconds, not at once.
    tokio::time::sleep(SETTLE).await;
    serving.replace(&next)?;
    tokio::time::sleep(SETTLE).await;
    registration.ca_bundle = next.ca_pem.clone();
    register(client, compiled, registration).await?;
    tracing::info!(not_after = ?next.not_after, "webhook certificate renewed");
    Ok(next)
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
}
