//! An OpenID Connect issuer on loopback for tests: discovery, a JWKS with one key (P-256,
//! or an RSA key given), and ES256 or RS256 tokens signed with it (or naming any `kid`, to
//! play a key the issuer never published). Signed with ring directly, so the tests do not
//! lean on the code they check.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RSA_PKCS1_SHA256, RsaKeyPair};
use serde_json::{Value, json};

enum Key {
    Ec(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

pub struct TestIssuer {
    url: String,
    key: Key,
    rng: SystemRandom,
    jwk: Value,
    fetches: Arc<AtomicUsize>,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl TestIssuer {
    /// An ES256 issuer with a new P-256 key, serving `/.well-known/openid-configuration` and
    /// `/jwks` on a free loopback port.
    pub async fn start() -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("a P-256 key");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).expect("the key");
        let point = key.public_key().as_ref().to_vec();
        let jwk = json!({"kty": "EC", "crv": "P-256", "x": b64(&point[1..33]), "y": b64(&point[33..65]),
                         "kid": "test-key", "alg": "ES256", "use": "sig"});
        Self::serve(Key::Ec(key), rng, jwk).await
    }

    /// An RS256 issuer (as GitHub's, GitLab's and Vault's are) with this RSA key (PKCS#1 DER).
    pub async fn start_rsa(pkcs1_der: &[u8]) -> Self {
        let key = RsaKeyPair::from_der(pkcs1_der).expect("an RSA key");
        let public = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(key.public());
        let jwk = json!({"kty": "RSA", "n": b64(&public.n), "e": b64(&public.e),
                         "kid": "test-key", "alg": "RS256", "use": "sig"});
        Self::serve(Key::Rsa(key), SystemRandom::new(), jwk).await
    }

    async fn serve(key: Key, rng: SystemRandom, jwk: Value) -> Self {
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
            key,
            rng,
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
        let alg = match self.key {
            Key::Ec(_) => "ES256",
            Key::Rsa(_) => "RS256",
        };
        let header = json!({"alg": alg, "typ": "JWT", "kid": kid});
        let signed = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let signature = match &self.key {
            Key::Ec(key) => key
                .sign(&self.rng, signed.as_bytes())
                .expect("a signature")
                .as_ref()
                .to_vec(),
            Key::Rsa(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(&RSA_PKCS1_SHA256, &self.rng, signed.as_bytes(), &mut signature)
                    .expect("a signature");
                signature
            }
        };
        format!("{signed}.{}", b64(&signature))
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
