//! The webhook server's TLS: a certificate given as files, or a CA and serving certificate
//! the gateway makes itself and renews before they expire (the API server trusts the CA
//! through the webhook configurations' `caBundle`). The server itself is the one every door
//! shares ([`orkestra_net::server`]): HTTP/1.1, with its timeouts and connection caps.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::json;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{self, ServerConfig};

/// A serving certificate, its key, and the CA a client should trust for it.
#[derive(Debug, Clone)]
pub struct Identity {
    pub cert_pem: String,
    pub key_pem: String,
    pub ca_pem: String,
    /// When the certificate stops being valid (`None`: given, not made here).
    pub not_after: Option<jiff::Timestamp>,
}

/// TLS errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the certificate or key is not usable: {0}")]
    Pem(String),
    #[error("cannot make a certificate: {0}")]
    Generate(String),
}

impl Identity {
    /// A new CA and a certificate it signs for `names` (DNS names or IP addresses), valid
    /// for `valid_for`.
    pub fn generate(names: &[String], valid_for: Duration) -> Result<Self, Error> {
        let spec = json!({
            "commonName": names.first().cloned().unwrap_or_else(|| "orkestra-gateway".into()),
            "dnsNames": names,
            "validFor": format!("{}s", valid_for.as_secs().max(1)),
        });
        let data = orkestra_effects::tls::generate(&spec, valid_for).map_err(|e| Error::Generate(e.to_string()))?;
        let text = |key: &str| data[key].as_str().unwrap_or_default().to_string();
        Ok(Self {
            cert_pem: text("tls.crt"),
            key_pem: text("tls.key"),
            ca_pem: text("ca.crt"),
            not_after: jiff::Timestamp::now()
                .checked_add(jiff::SignedDuration::try_from(valid_for).unwrap_or_default())
                .ok(),
        })
    }

    /// A certificate and key from files; the CA is `ca`, or the certificate itself.
    pub fn from_files(cert: &PathBuf, key: &PathBuf, ca: Option<&PathBuf>) -> Result<Self, Error> {
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path).map_err(|source| Error::Read {
                path: path.clone(),
                source,
            })
        };
        let ca_pem = ca.map(read).transpose()?;
        Ok(Self::given(read(cert)?, read(key)?, ca_pem))
    }

    /// A certificate and key given (not made here); the CA is `ca_pem`, or the certificate
    /// itself (a self-signed one).
    pub fn given(cert_pem: String, key_pem: String, ca_pem: Option<String>) -> Self {
        Self {
            ca_pem: ca_pem.unwrap_or_else(|| cert_pem.clone()),
            cert_pem,
            key_pem,
            not_after: None,
        }
    }

    fn certified(&self) -> Result<Arc<CertifiedKey>, Error> {
        let chain = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::Pem(e.to_string()))?;
        if chain.is_empty() {
            return Err(Error::Pem("no certificate in the file".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(|e| Error::Pem(e.to_string()))?;
        let signing = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| Error::Pem(e.to_string()))?;
        Ok(Arc::new(CertifiedKey::new(chain, signing)))
    }
}

/// The certificate the server presents, swappable while it runs.
#[derive(Debug)]
pub struct Serving {
    current: RwLock<Arc<CertifiedKey>>,
}

impl Serving {
    pub fn new(identity: &Identity) -> Result<Arc<Self>, Error> {
        Ok(Arc::new(Self {
            current: RwLock::new(identity.certified()?),
        }))
    }

    /// Presents `identity` to every handshake from now on.
    pub fn replace(&self, identity: &Identity) -> Result<(), Error> {
        let certified = identity.certified()?;
        *self.current.write() = certified;
        Ok(())
    }
}

impl ResolvesServerCert for Serving {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().clone())
    }
}

/// The acceptor of the webhook server: HTTP/1.1 over TLS with the certificate `serving`
/// presents (swapped at each renewal).
pub fn acceptor(serving: Arc<Serving>) -> Result<TlsAcceptor, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Pem(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(serving);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_identity_loads_and_is_replaced() {
        let first = Identity::generate(&["127.0.0.1".into(), "localhost".into()], Duration::from_secs(3600)).unwrap();
        let serving = Serving::new(&first).unwrap();
        let second = Identity::generate(&["127.0.0.1".into()], Duration::from_secs(60)).unwrap();
        assert_ne!(first.ca_pem, second.ca_pem);
        serving.replace(&second).unwrap();
        let broken = Identity {
            key_pem: "not a key".into(),
            ..second
        };
        assert!(serving.replace(&broken).is_err(), "a broken identity is refused");
    }
}
