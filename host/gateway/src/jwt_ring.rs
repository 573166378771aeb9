//! jsonwebtoken's signature checks done by ring, the crypto library the TLS stack already
//! links: a P-256 check costs a tenth of the pure-Rust one, and no second set of crypto
//! crates is built. Only verification: the gateway signs no JWTs, and every algorithm it
//! does not check (HMAC among them) is an error, never a panic.

use std::sync::Once;

use jsonwebtoken::crypto::{CryptoProvider, JwkUtils, JwtSigner, JwtVerifier};
use jsonwebtoken::errors::{ErrorKind, Result};
use jsonwebtoken::signature::{Error, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::signature::{self as ring_sig, RsaPublicKeyComponents, UnparsedPublicKey, VerificationAlgorithm};

/// Makes ring jsonwebtoken's provider for this process (once; later calls do nothing).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Another provider installed first (by an embedding program) is kept.
        let _ = PROVIDER.install_default();
    });
}

static PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: verifier,
    jwk_utils: JwkUtils {
        extract_rsa_public_key_components: |_| Err(ErrorKind::InvalidKeyFormat.into()),
        extract_ec_public_key_coordinates: |_, _| Err(ErrorKind::InvalidKeyFormat.into()),
        compute_digest: |_, _| Vec::new(),
    },
};

fn no_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    Err(ErrorKind::InvalidAlgorithm.into())
}

fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    let (family, check): (AlgorithmFamily, Check) = match algorithm {
        Algorithm::ES256 => (AlgorithmFamily::Ec, Check::Point(&ring_sig::ECDSA_P256_SHA256_FIXED)),
        Algorithm::ES384 => (AlgorithmFamily::Ec, Check::Point(&ring_sig::ECDSA_P384_SHA384_FIXED)),
        Algorithm::EdDSA => (AlgorithmFamily::Ed, Check::Point(&ring_sig::ED25519)),
        Algorithm::RS256 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA256)),
        Algorithm::RS384 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA384)),
        Algorithm::RS512 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA512)),
        Algorithm::PS256 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA256)),
        Algorithm::PS384 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA384)),
        Algorithm::PS512 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA512)),
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    if key.family() != family {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    Ok(Box::new(RingVerifier {
        algorithm: *algorithm,
        check,
        key: key.clone(),
    }))
}

#[derive(Clone, Copy)]
enum Check {
    /// A public key given as bytes (an EC point, an Ed25519 key).
    Point(&'static dyn VerificationAlgorithm),
    /// An RSA key given as modulus and exponent.
    Rsa(&'static ring_sig::RsaParameters),
}

struct RingVerifier {
    algorithm: Algorithm,
    check: Check,
    key: DecodingKey,
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, message: &[u8], signature: &Vec<u8>) -> std::result::Result<(), Error> {
        let checked = match (self.check, self.key.kind()) {
            (Check::Point(algorithm), DecodingKeyKind::SecretOrDer(bytes)) => {
                UnparsedPublicKey::new(algorithm, bytes).verify(message, signature)
            }
            (Check::Rsa(parameters), DecodingKeyKind::RsaModulusExponent { n, e }) => {
                RsaPublicKeyComponents { n, e }.verify(parameters, message, signature)
            }
            _ => return Err(Error::new()),
        };
        checked.map_err(|_| Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use ring::rand::SystemRandom;
    use ring::rsa::PublicKeyComponents;
    use ring::signature::RsaKeyPair;
    use serde_json::{Value, json};

    use super::*;

    /// A 2048-bit RSA key made for these tests only (PKCS#1 DER).
    const RSA_KEY: &[u8] = include_bytes!("../testdata/rsa-test-key.der");

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    fn signed(alg: &str, encoding: &'static dyn ring::signature::RsaEncoding, key: &RsaKeyPair) -> String {
        let claims = json!({"sub": "s", "exp": jiff::Timestamp::now().as_second() + 60});
        let message = format!(
            "{}.{}",
            b64(json!({"alg": alg}).to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let mut signature = vec![0; key.public().modulus_len()];
        key.sign(encoding, &SystemRandom::new(), message.as_bytes(), &mut signature)
            .unwrap();
        format!("{message}.{}", b64(&signature))
    }

    fn check(token: &str, alg: Algorithm, key: &DecodingKey) -> Result<Value> {
        install();
        jsonwebtoken::decode::<Value>(token, key, &jsonwebtoken::Validation::new(alg)).map(|t| t.claims)
    }

    #[test]
    fn rsa_signatures_verify_and_a_changed_one_does_not() {
        let pair = RsaKeyPair::from_der(RSA_KEY).unwrap();
        let public = PublicKeyComponents::<Vec<u8>>::from(pair.public());
        let key = DecodingKey::from_rsa_raw_components(&public.n, &public.e);
        for (alg, name, encoding) in [
            (
                Algorithm::RS256,
                "RS256",
                &ring_sig::RSA_PKCS1_SHA256 as &'static dyn ring_sig::RsaEncoding,
            ),
            (Algorithm::PS256, "PS256", &ring_sig::RSA_PSS_SHA256),
        ] {
            let token = signed(name, encoding, &pair);
            assert_eq!(check(&token, alg, &key).unwrap()["sub"], "s", "{name}");
            let mut bad = token.clone();
            bad.replace_range(bad.len() - 4.., "AAAA");
            assert!(check(&bad, alg, &key).is_err(), "{name}: a changed signature");
        }
    }

    #[test]
    fn a_key_of_the_wrong_family_or_an_unchecked_algorithm_is_an_error() {
        let pair = RsaKeyPair::from_der(RSA_KEY).unwrap();
        let token = signed("RS256", &ring_sig::RSA_PKCS1_SHA256, &pair);
        let ec = DecodingKey::from_ec_components(&b64(&[1; 32]), &b64(&[2; 32])).unwrap();
        assert!(check(&token, Algorithm::RS256, &ec).is_err());
        assert!(verifier(&Algorithm::HS256, &DecodingKey::from_secret(b"k")).is_err());
        assert!(no_signer(&Algorithm::ES256, &EncodingKey::from_secret(b"k")).is_err());
    }
}
