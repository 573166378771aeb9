//! Idle connections, as an attacker holds them: plain TCP, or TLS with the handshake done
//! (so a server's handshake timeout does not end them), then nothing sent; or stalled ones,
//! whose request's headers and first byte of body were sent, the rest never (a body
//! dripping slower than anything would), from many loopback addresses.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{self, ClientConfig, DigitallySignedStruct, SignatureScheme};

/// An open connection that sends nothing.
pub enum Idle {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Idle {
    /// Whether the server has closed it (within `wait`).
    pub async fn closed(&mut self, wait: Duration) -> bool {
        let mut byte = [0u8; 1];
        let read = async {
            match self {
                Idle::Plain(stream) => stream.read(&mut byte).await,
                Idle::Tls(stream) => stream.read(&mut byte).await,
            }
        };
        matches!(tokio::time::timeout(wait, read).await, Ok(Ok(0) | Err(_)))
    }
}

/// `count` plain connections to `addr`.
pub async fn plain(addr: SocketAddr, count: usize) -> Vec<Idle> {
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        if let Ok(stream) = TcpStream::connect(addr).await {
            held.push(Idle::Plain(stream));
        }
    }
    held
}

/// `count` TLS connections to `addr`, each past its handshake (any certificate accepted:
/// the attacker does not care whom it talks to). A connection the server refuses or
/// closes before its handshake finishes is left out.
pub async fn tls(addr: SocketAddr, count: usize) -> Vec<Idle> {
    let connector = any_certificate();
    let name = ServerName::try_from("localhost").expect("a server name");
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        let Ok(stream) = TcpStream::connect(addr).await else {
            continue;
        };
        let handshake = tokio::time::timeout(Duration::from_secs(5), connector.connect(name.clone(), stream)).await;
        if let Ok(Ok(tls)) = handshake {
            held.push(Idle::Tls(Box::new(tls)));
        }
    }
    held
}

fn any_certificate() -> TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// `count` connections to `addr` (over TLS when `tls`), from the loopback addresses
/// 127.0.0.2 onwards, `per_source` from each, each sending `head` (a request's headers,
/// declaring a body) and one byte of its body, then nothing more. A connection the server
/// refuses is left out.
pub async fn stalled(addr: SocketAddr, count: usize, per_source: usize, head: &str, tls: bool) -> Vec<Idle> {
    let connector = any_certificate();
    let name = ServerName::try_from("localhost").expect("a server name");
    let mut held = Vec::with_capacity(count);
    for i in 0..count {
        let source = std::net::Ipv4Addr::new(127, 0, 0, 2 + (i / per_source.max(1)) as u8);
        let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
            continue;
        };
        if socket.bind(SocketAddr::new(source.into(), 0)).is_err() {
            continue;
        }
        let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_secs(5), socket.connect(addr)).await else {
            continue;
        };
        let sent = format!("{head}x");
        let connection = match tls {
            false => {
                let mut stream = stream;
                if stream.write_all(sent.as_bytes()).await.is_err() {
                    continue;
                }
                Idle::Plain(stream)
            }
            true => {
                let handshake = tokio::time::timeout(Duration::from_secs(5), connector.connect(name.clone(), stream));
                let Ok(Ok(mut stream)) = handshake.await else { continue };
                if stream.write_all(sent.as_bytes()).await.is_err() || stream.flush().await.is_err() {
                    continue;
                }
                Idle::Tls(Box::new(stream))
            }
        };
        held.push(connection);
    }
    held
}

#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
