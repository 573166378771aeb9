//! OIDC bearer tokens: a JWT signed by an issuer the Katalog names (GitHub Actions, GitLab,
//! Vault, or any OpenID Connect issuer), verified here with the issuer's published keys
//! (signature, `exp`, `nbf`, the exact `iss`, `aud` when the entry names one), then held to
//! the entry's `allow` claims. The verified `sub` is the caller's identity, stamped on what
//! it applies as `serve-source`.
//!
//! Keys are fetched by discovery (or from GitHub's fixed JWKS address), cached for an hour,
//! and fetched again early only for a `kid` the cache does not know, at most every ten
//! seconds per issuer: a stream of made-up `kid`s costs the issuer nothing. A token that
//! verified is remembered (by its SHA-256) until it expires, so a CI job's many calls with
//! one token pay for one signature check.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use tokio::sync::Mutex;

use orkestra_katalog::model::{OidcKind, TokenSource};

/// How long fetched keys are trusted.
const KEYS_TTL: Duration = Duration::from_secs(3600);
/// The shortest gap between two fetches of one issuer's keys.
const REFETCH_FLOOR: Duration = Duration::from_secs(10);
/// Discovery documents and key sets are small; past this an answer is refused.
const DOCUMENT_LIMIT: usize = 1 << 20;
const GITHUB_JWKS: &str = "https://token.actions.githubusercontent.com/.well-known/jwks";

/// Asymmetric algorithms only: an HMAC "signature" made with a public key proves nothing.
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why a token was refused (said to the caller in the 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("not a signed JWT ({0})")]
    Malformed(String),
    #[error("algorithm {0:?} is not accepted (asymmetric signatures only)")]
    Algorithm(Algorithm),
    #[error("no token entry accepts issuer {0:?}")]
    UnknownIssuer(String),
    #[error("the issuer's keys cannot be had: {0}")]
    Keys(String),
    #[error("signed with a key the issuer does not publish")]
    UnknownKey,
    #[error("{0}")]
    Invalid(String),
    #[error("audience or claims do not match any token entry")]
    NotAllowed,
}

/// The caller a token proves: the token entry's name and the verified `sub`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub token: String,
    pub subject: String,
}

/// One token entry of an issuer.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    audience: Option<String>,
    allow: Vec<(String, String)>,
}

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, (DecodingKey, Option<Algorithm>)>,
    fetched: Option<Instant>,
    attempted: Option<Instant>,
}

struct Issuer {
    iss: String,
    /// Known up front (GitHub), else found by discovery.
    jwks_uri: Option<String>,
    entries: Vec<Entry>,
    keys: Mutex<Keys>,
}

/// At most this many verified tokens are remembered.
const REMEMBERED: usize = 10_000;

/// Every OIDC token entry of the Katalog, by issuer.
pub struct Verifiers {
    issuers: Vec<Issuer>,
    http: reqwest::Client,
    /// Tokens that verified, by digest: who they prove and until when (`exp`).
    verified: parking_lot::Mutex<HashMap<[u8; 32], (Identity, i64)>>,
}

impl Verifiers {
    /// The verifiers of the OIDC entries among `sources` (the others are static tokens).
    pub fn new(sources: &[TokenSource]) -> Arc<Self> {
        crate::jwt_ring::install();
        let mut issuers: Vec<Issuer> = Vec::new();
        for source in sources {
            let Some((kind, oidc)) = source.oidc_source() else {
                continue;
            };
            // Validation refuses an entry without its issuer; nothing to verify against.
            let Some(iss) = oidc.issuer_for(kind) else { continue };
            let entry = Entry {
                name: source.name.clone(),
                audience: oidc.audience.clone().filter(|a| !a.is_empty()),
                allow: oidc.allow.iter().map(|(k, v)| (k.clone(), scalar(v))).collect(),
            };
            match issuers.iter_mut().find(|i| i.iss == iss) {
                Some(issuer) => issuer.entries.push(entry),
                None => issuers.push(Issuer {
                    jwks_uri: (kind == OidcKind::Github).then(|| GITHUB_JWKS.to_string()),
                    iss,
                    entries: vec![entry],
                    keys: Mutex::default(),
                }),
            }
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Arc::new(Self {
            issuers,
            http,
            verified: parking_lot::Mutex::default(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.issuers.is_empty()
    }

    /// Verifies `bearer` and finds the entry that accepts it.
    pub async fn verify(&self, bearer: &str) -> Result<Identity, Refused> {
        use sha2::Digest;
        let digest: [u8; 32] = sha2::Sha256::digest(bearer.as_bytes()).into();
        let now = jiff::Timestamp::now().as_second();
        if let Some((identity, _)) = self.remembered().get(&digest).filter(|(_, exp)| *exp > now) {
            return Ok(identity.clone());
        }
        let (identity, exp) = self.check(bearer).await?;
        let mut remembered = self.remembered();
        if remembered.len() >= REMEMBERED {
            remembered.retain(|_, (_, exp)| *exp > now);
            if remembered.len() >= REMEMBERED {
                remembered.clear();
            }
        }
        remembered.insert(digest, (identity.clone(), exp));
        Ok(identity)
    }

    fn remembered(&self) -> parking_lot::MutexGuard<'_, HashMap<[u8; 32], (Identity, i64)>> {
        self.verified.lock()
    }

    /// The signature and claims check, and the token's `exp`.
    async fn check(&self, bearer: &str) -> Result<(Identity, i64), Refused> {
        let header = jsonwebtoken::decode_header(bearer).map_err(|e| Refused::Malformed(e.to_string()))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Refused::Algorithm(header.alg));
        }
        let issuer = match self.issuers.as_slice() {
            // One issuer: its iss is checked exactly with the signature, below.
            [only] => only,
            // The claimed issuer picks the keys; nothing is believed before the signature
            // is checked.
            issuers => {
                let iss = unverified_issuer(bearer)?;
                issuers
                    .iter()
                    .find(|i| i.iss == iss)
                    .ok_or(Refused::UnknownIssuer(iss))?
            }
        };
        let kid = header.kid.clone().unwrap_or_default();
        let (key, alg) = self.key(issuer, &kid).await?;
        if alg.is_some_and(|a| a != header.alg) {
            return Err(Refused::Invalid(format!(
                "the key {kid:?} is for {alg:?}, the token says {:?}",
                header.alg
            )));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&issuer.iss]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = 30;
        // Each entry checks its own audience below.
        validation.validate_aud = false;
        let claims = jsonwebtoken::decode::<serde_json::Map<String, Value>>(bearer, &key, &validation)
            .map_err(|e| Refused::Invalid(describe(&e)))?
            .claims;
        let subject = claims.get("sub").map(scalar).unwrap_or_default();
        let exp = claims.get("exp").and_then(Value::as_i64).unwrap_or_default();
        issuer
            .entries
            .iter()
            .find(|entry| accepts(entry, &claims))
            .map(|entry| {
                let identity = Identity {
                    token: entry.name.clone(),
                    subject,
                };
                (identity, exp)
            })
            .ok_or(Refused::NotAllowed)
    }

    /// The key `kid` of the issuer, fetched when the cache is stale or does not know it.
    async fn key(&self, issuer: &Issuer, kid: &str) -> Result<(DecodingKey, Option<Algorithm>), Refused> {
        let mut keys = issuer.keys.lock().await;
        let fresh = keys.fetched.is_some_and(|at| at.elapsed() < KEYS_TTL);
        let lookup = |keys: &Keys| match kid.is_empty() && keys.by_kid.len() == 1 {
            true => keys.by_kid.values().next().cloned(),
            false => keys.by_kid.get(kid).cloned(),
        };
        if fresh && let Some(found) = lookup(&keys) {
            return Ok(found);
        }
        if keys.attempted.is_some_and(|at| at.elapsed() < REFETCH_FLOOR) {
            return lookup(&keys).ok_or(Refused::UnknownKey);
        }
        keys.attempted = Some(Instant::now());
        match self.fetch(issuer).await {
            Ok(by_kid) => {
                keys.by_kid = by_kid;
                keys.fetched = Some(Instant::now());
            }
            // Keys fetched before stay usable while the issuer is unreachable.
            Err(why) if keys.by_kid.is_empty() => return Err(Refused::Keys(why)),
            Err(why) => {
                tracing::warn!(issuer = %issuer.iss, %why, "refreshing the issuer's keys failed; keeping the last ones")
            }
        }
        lookup(&keys).ok_or(Refused::UnknownKey)
    }

    async fn fetch(&self, issuer: &Issuer) -> Result<HashMap<String, (DecodingKey, Option<Algorithm>)>, String> {
        let jwks_uri = match &issuer.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let url = format!("{}/.well-known/openid-configuration", issuer.iss);
                let document: Value = self.document(&url).await?;
                if document["issuer"].as_str().map(|i| i.trim_end_matches('/')) != Some(&issuer.iss) {
                    return Err(format!("{url} names another issuer ({})", document["issuer"]));
                }
                document["jwks_uri"]
                    .as_str()
                    .ok_or_else(|| format!("{url} has no jwks_uri"))?
                    .to_string()
            }
        };
        let set: JwkSet = self.document(&jwks_uri).await?;
        let mut by_kid = HashMap::new();
        for jwk in &set.keys {
            let alg = jwk
                .common
                .key_algorithm
                .and_then(|a| a.to_string().parse::<Algorithm>().ok());
            if let Ok(key) = DecodingKey::from_jwk(jwk) {
                by_kid.insert(jwk.common.key_id.clone().unwrap_or_default(), (key, alg));
            }
        }
        tracing::debug!(issuer = %issuer.iss, keys = by_kid.len(), "issuer keys fetched");
        Ok(by_kid)
    }

    async fn document<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let mut response = self
            .http
            .get(url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| format!("{url}: {e}"))?;
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
            if body.len() + chunk.len() > DOCUMENT_LIMIT {
                return Err(format!("{url}: the answer is over {DOCUMENT_LIMIT} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url}: {e}"))
    }
}

/// The `iss` a token claims, read before its signature is checked (to pick the keys only).
fn unverified_issuer(bearer: &str) -> Result<String, Refused> {
    use base64::Engine;
    let payload = bearer
        .split('.')
        .nth(1)
        .ok_or_else(|| Refused::Malformed("no payload".into()))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| Refused::Malformed("the payload is not base64url".into()))?;
    let claims: Value =
        serde_json::from_slice(&bytes).map_err(|_| Refused::Malformed("the payload is not JSON".into()))?;
    claims["iss"]
        .as_str()
        .map(|i| i.trim_end_matches('/').to_string())
        .ok_or_else(|| Refused::Malformed("no iss claim".into()))
}

fn describe(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidSignature => "the signature does not verify".into(),
        ErrorKind::InvalidIssuer => "the issuer does not match".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim} claim"),
        other => format!("the token does not verify: {other:?}"),
    }
}

/// The entry's audience (when it names one) and every `allow` claim hold.
fn accepts(entry: &Entry, claims: &serde_json::Map<String, Value>) -> bool {
    let audience_ok = match &entry.audience {
        None => true,
        Some(wanted) => match claims.get("aud") {
            Some(Value::String(aud)) => aud == wanted,
            Some(Value::Array(auds)) => auds.iter().any(|a| a == wanted.as_str()),
            _ => false,
        },
    };
    audience_ok
        && entry.allow.iter().all(|(key, wanted)| {
            let claim = claims.get(key).or_else(|| claims.get(&snake_case(key)));
            claim.is_some_and(|v| !v.is_object() && !v.is_array() && scalar(v) == *wanted)
        })
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `namespacePath` as `namespace_path`.
fn snake_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use orkestra_test_support::oidc::TestIssuer;
    use serde_json::json;

    use super::*;

    fn sources(issuer: &str) -> Vec<TokenSource> {
        serde_json::from_value(json!([
            {"name": "deploy", "oidc": {"issuer": issuer, "audience": "orkestra",
                                        "allow": {"repository": "shop/web", "refProtected": true}}},
            {"name": "anyone", "oidc": {"issuer": issuer, "audience": "other"}},
        ]))
        .unwrap()
    }

    fn claims(issuer: &TestIssuer) -> Value {
        let now = jiff::Timestamp::now().as_second();
        json!({"iss": issuer.url(), "sub": "repo:shop/web:ref:refs/heads/main", "aud": ["orkestra"],
               "exp": now + 300, "iat": now, "repository": "shop/web", "ref_protected": true})
    }

    #[tokio::test]
    async fn a_token_of_the_issuer_is_verified_and_names_its_subject() {
        let issuer = TestIssuer::start().await;
        let verifiers = Verifiers::new(&sources(&issuer.url()));
        let identity = verifiers.verify(&issuer.sign(&claims(&issuer))).await.unwrap();
        assert_eq!(identity.token, "deploy");
        assert_eq!(identity.subject, "repo:shop/web:ref:refs/heads/main");
        let mut other = claims(&issuer);
        other["aud"] = json!("other");
        assert_eq!(verifiers.verify(&issuer.sign(&other)).await.unwrap().token, "anyone");
    }

    #[tokio::test]
    async fn every_bad_token_is_refused_for_its_own_reason() {
        let issuer = TestIssuer::start().await;
        let verifiers = Verifiers::new(&sources(&issuer.url()));
        let now = jiff::Timestamp::now().as_second();
        let with = |key: &str, value: Value| {
            let mut c = claims(&issuer);
            c[key] = value;
            issuer.sign(&c)
        };
        let refused = |token: String| {
            let verifiers = verifiers.clone();
            async move { verifiers.verify(&token).await.unwrap_err() }
        };
        assert_eq!(
            refused(with("exp", json!(now - 600))).await,
            Refused::Invalid("the token has expired".into())
        );
        assert_eq!(
            refused(with("nbf", json!(now + 600))).await,
            Refused::Invalid("the token is not valid yet (nbf)".into())
        );
        assert_eq!(
            refused(with("iss", json!("https://elsewhere.example"))).await,
            Refused::Invalid("the issuer does not match".into())
        );
        assert_eq!(refused(with("aud", json!("someone-else"))).await, Refused::NotAllowed);
        assert_eq!(
            refused(with("repository", json!("shop/other"))).await,
            Refused::NotAllowed
        );
        // alg none: an unsigned token.
        let unsigned = {
            use base64::Engine;
            let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
            format!(
                "{}.{}.",
                b64(&json!({"alg": "none", "typ": "JWT"})),
                b64(&claims(&issuer))
            )
        };
        assert!(matches!(refused(unsigned).await, Refused::Malformed(_)));
        // HS256 signed with the issuer's public key as the secret.
        let hmac = {
            use base64::Engine;
            let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
            let signed = format!(
                "{}.{}",
                b64(json!({"alg": "HS256", "typ": "JWT"}).to_string().as_bytes()),
                b64(claims(&issuer).to_string().as_bytes())
            );
            let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, issuer.public_jwk().to_string().as_bytes());
            format!("{signed}.{}", b64(ring::hmac::sign(&key, signed.as_bytes()).as_ref()))
        };
        assert_eq!(refused(hmac).await, Refused::Algorithm(Algorithm::HS256));
        // A payload changed after signing.
        let token = issuer.sign(&claims(&issuer));
        let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
        let mut forged = claims(&issuer);
        forged["sub"] = json!("repo:shop/web:ref:refs/heads/evil");
        parts[1] = {
            use base64::Engine;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(forged.to_string())
        };
        assert_eq!(
            refused(parts.join(".")).await,
            Refused::Invalid("the signature does not verify".into())
        );
        // Signed by a key the issuer does not publish.
        let stranger = TestIssuer::start().await;
        let mut foreign = claims(&issuer);
        foreign["iss"] = json!(issuer.url());
        assert!(matches!(
            refused(stranger.sign_as(&foreign, "stranger-key")).await,
            Refused::UnknownKey
        ));
        assert!(matches!(refused("not-a-jwt".into()).await, Refused::Malformed(_)));
    }

    #[tokio::test]
    async fn a_verified_token_is_remembered_until_it_expires_and_no_longer() {
        let issuer = TestIssuer::start().await;
        let verifiers = Verifiers::new(&sources(&issuer.url()));
        let now = jiff::Timestamp::now().as_second();
        let mut short = claims(&issuer);
        short["exp"] = json!(now + 2);
        let token = issuer.sign(&short);
        assert!(verifiers.verify(&token).await.is_ok());
        assert_eq!(verifiers.remembered().len(), 1);
        // Past its exp the remembered result no longer answers; the signature check runs
        // again (and, within the leeway, still passes).
        verifiers.remembered().values_mut().for_each(|(_, exp)| *exp = now - 1);
        assert!(verifiers.verify(&token).await.is_ok());
        let (_, exp) = verifiers.remembered().values().next().cloned().unwrap();
        assert_eq!(exp, now + 2, "remembered again with its real exp");
    }

    #[tokio::test]
    async fn keys_are_fetched_once_and_a_made_up_kid_does_not_refetch_them() {
        let issuer = TestIssuer::start().await;
        let verifiers = Verifiers::new(&sources(&issuer.url()));
        for _ in 0..5 {
            verifiers.verify(&issuer.sign(&claims(&issuer))).await.unwrap();
        }
        for n in 0..5 {
            let token = issuer.sign_as(&claims(&issuer), &format!("made-up-{n}"));
            assert!(verifiers.verify(&token).await.is_err());
        }
        assert_eq!(
            issuer.jwks_fetches(),
            1,
            "made-up kids within ten seconds of a fetch fetch nothing"
        );
    }

    #[tokio::test]
    async fn with_several_issuers_the_claimed_one_picks_the_keys() {
        let (one, two) = (TestIssuer::start().await, TestIssuer::start().await);
        let mut both = sources(&one.url());
        both.extend(sources(&two.url()));
        let verifiers = Verifiers::new(&both);
        for issuer in [&one, &two] {
            assert_eq!(
                verifiers.verify(&issuer.sign(&claims(issuer))).await.unwrap().token,
                "deploy"
            );
        }
        let mut stranger = claims(&one);
        stranger["iss"] = json!("https://elsewhere.example");
        assert!(matches!(
            verifiers.verify(&one.sign(&stranger)).await,
            Err(Refused::UnknownIssuer(_))
        ));
        // Signed by one, claiming to be two: two's key of the same kid does not verify it.
        let mut forged = claims(&one);
        forged["iss"] = json!(two.url());
        assert_eq!(
            verifiers.verify(&one.sign(&forged)).await.unwrap_err(),
            Refused::Invalid("the signature does not verify".into())
        );
    }

    #[test]
    fn camel_case_allow_keys_match_snake_case_claims() {
        assert_eq!(snake_case("namespacePath"), "namespace_path");
        let entry = Entry {
            name: "ci".into(),
            audience: None,
            allow: vec![
                ("namespacePath".into(), "shop".into()),
                ("refProtected".into(), "true".into()),
            ],
        };
        let claims = json!({"namespace_path": "shop", "ref_protected": "true"});
        assert!(accepts(&entry, claims.as_object().unwrap()));
        let claims = json!({"namespace_path": "shop"});
        assert!(!accepts(&entry, claims.as_object().unwrap()), "a missing claim fails");
    }
}
