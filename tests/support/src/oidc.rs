//! An OpenID Connect issuer on loopback for tests: discovery, a JWKS with one P-256 key,
//! and tokens signed with it (or with any `kid`, to play a key the issuer never published).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use serde_json::{Value, json};

pub struct TestIssuer {
    url: String,
    key: jsonwebtoken::EncodingKey,
    jwk: Value,
    fetches: Arc<AtomicUsize>,
}

impl TestIssuer {
    /// Serves `/.well-known/openid-configuration` and `/jwks` on a free loopback port.
    pub async fn start() -> Self {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a P-256 key");
        let raw = pair.public_key_raw();
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let jwk = json!({"kty": "EC", "crv": "P-256", "x": b64(&raw[1..33]), "y": b64(&raw[33..65]),
                         "kid": "test-key", "alg": "ES256", "use": "sig"});
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let fetches = Arc::new(AtomicUsize::new(0));
        let discovery = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
        let set = json!({"keys": [jwk]});
        let counter = fetches.clone();
        let app = axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                axum::routing::get(move || async move { axum::Json(discovery) }),
            )
            .route(
                "/jwks",
                axum::routing::get(move || {
                    counter.fetch_add(1, Ordering::Relaxed);
                    async move { axum::Json(set) }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            url,
            key: jsonwebtoken::EncodingKey::from_ec_der(&pair.serialize_der()),
            jwk,
            fetches,
        }
    }

    /// The issuer (`iss`) its tokens carry.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// A token with these claims, signed with the published key.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(claims, "test-key")
    }

    /// A token signed with this issuer's key, its header naming `kid`.
    pub fn sign_as(&self, claims: &Value, kid: &str) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(kid.to_string());
        jsonwebtoken::encode(&header, claims, &self.key).expect("a signed token")
    }

    /// The published key, as a JWK.
    pub fn public_jwk(&self) -> &Value {
        &self.jwk
    }

    /// How many times the key set was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.fetches.load(Ordering::Relaxed)
    }
}
