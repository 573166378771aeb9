//! `secrets[].tls`: a self-signed CA and a server certificate it signs, as a
//! `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`, `ca.crt`). ECDSA P-256 keys.
//!
//! Pure: no kube or wasmtime imports.

use crate::error::Error;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use serde_json::{Map, Value, json};

/// Validity when neither `validFor` nor `rotateAfter` says otherwise.
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(365 * 86400);

/// The Secret's `stringData` for a `tls` block: `{commonName, dnsNames, validFor}` (rendered).
pub fn generate(spec: &Value, fallback_validity: Duration) -> Result<Map<String, Value>, Error> {
    let common_name = spec["commonName"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::Certificate("tls.commonName is required".into()))?;
    let mut names: Vec<String> = spec["dnsNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect();
    if names.is_empty() {
        names.push(common_name.to_string());
    }
    let validity = match spec["validFor"].as_str() {
        Some(text) => {
            orkestra_expr::duration::parse(text).map_err(|e| Error::Certificate(format!("tls.validFor: {e}")))?
        }
        None => fallback_validity,
    };
    let now = time::OffsetDateTime::now_utc();
    let not_after =
        now + time::Duration::try_from(validity).map_err(|e| Error::Certificate(format!("tls.validFor: {e}")))?;
    let failed = |e: rcgen::Error| Error::Certificate(format!("tls: {e}"));

    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, format!("{common_name} CA"));
    (ca.not_before, ca.not_after) = (now, not_after);
    let ca_key = KeyPair::generate().map_err(failed)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(failed)?;

    let mut server = CertificateParams::new(names).map_err(failed)?;
    server.distinguished_name.push(DnType::CommonName, common_name);
    (server.not_before, server.not_after) = (now, not_after);
    let key = KeyPair::generate().map_err(failed)?;
    let cert = server.signed_by(&key, &ca_cert, &ca_key).map_err(failed)?;

    let mut data = Map::new();
    data.insert("tls.crt".into(), json!(cert.pem()));
    data.insert("tls.key".into(), json!(key.serialize_pem()));
    data.insert("ca.crt".into(), json!(ca_cert.pem()));
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_and_a_server_certificate_in_pem() {
        let data = generate(
            &json!({"commonName": "web.shop.svc", "dnsNames": ["web", "web.shop.svc"], "validFor": "30d"}),
            DEFAULT_VALIDITY,
        )
        .unwrap();
        for key in ["tls.crt", "ca.crt"] {
            assert!(
                data[key].as_str().unwrap().starts_with("-----BEGIN CERTIFICATE-----"),
                "{key}"
            );
        }
        assert!(data["tls.key"].as_str().unwrap().contains("PRIVATE KEY"));
        assert_ne!(data["tls.crt"], data["ca.crt"]);
        assert!(
            generate(&json!({}), DEFAULT_VALIDITY)
                .unwrap_err()
                .to_string()
                .contains("commonName is required")
        );
        assert!(
            generate(&json!({"commonName": "x", "validFor": "forever"}), DEFAULT_VALIDITY)
                .unwrap_err()
                .to_string()
                .contains("validFor")
        );
    }
}
