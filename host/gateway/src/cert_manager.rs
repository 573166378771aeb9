//! The webhook certificate issued by cert-manager (`security.certManager.issuerRef`): the
//! gateway asks for it with a `Certificate` (cert-manager.io/v1) for the names it is called
//! by, serves the Secret cert-manager writes (`tls.crt`, `tls.key`, and `ca.crt`, which the
//! API server is told to trust), and follows that Secret: each certificate cert-manager
//! renews into it is served in turn, the old and new CAs both trusted during the move.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_katalog::model::CertManager;
use orkestra_kube::objects::Objects;
use serde_json::json;

use crate::tls::Identity;

/// The Secret's name when the Katalog names none.
pub const DEFAULT_SECRET: &str = "orkestra-gateway-webhook-tls";
/// How long the first certificate may take to be issued.
const ISSUE_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the Secret is read for a renewed certificate.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(10);
/// The field manager of the gateway's Certificate.
const MANAGER: &str = "orkestra-gateway";

/// What goes wrong asking cert-manager.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot ask cert-manager for the webhook certificate (is cert-manager installed? its Certificate kind must be served): {0}"
    )]
    Request(kube::Error),
    #[error("cert-manager wrote no certificate into Secret {namespace}/{name} within {}s; see `kubectl describe certificate {name} -n {namespace}`", ISSUE_TIMEOUT.as_secs())]
    NotIssued { namespace: String, name: String },
}

/// The Secret the certificate is issued into.
pub fn secret_name(certs: &CertManager) -> &str {
    certs.secret_name.as_deref().unwrap_or(DEFAULT_SECRET)
}

/// Applies the `Certificate` for `names` (IP addresses and DNS names) in `namespace`.
pub async fn request(
    client: &kube::Client,
    namespace: &str,
    certs: &CertManager,
    names: &[String],
) -> Result<(), Error> {
    let Some(issuer) = &certs.issuer_ref else {
        return Ok(());
    };
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
        "certificates",
    );
    let certificates =
        Objects::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource).map_err(Error::Request)?;
    let (ips, dns): (Vec<&String>, Vec<&String>) = names.iter().partition(|n| n.parse::<IpAddr>().is_ok());
    let name = secret_name(certs);
    let mut spec = json!({
        "secretName": name,
        "commonName": dns.first().or(ips.first()),
        "dnsNames": dns,
        "ipAddresses": ips,
        "usages": ["server auth", "digital signature", "key encipherment"],
        "issuerRef": {
            "name": issuer.name,
            "kind": issuer.kind.as_deref().unwrap_or("Issuer"),
            "group": issuer.group.as_deref().unwrap_or("cert-manager.io"),
        },
    });
    for (key, value) in [("duration", &certs.duration), ("renewBefore", &certs.renew_before)] {
        if let Some(value) = value {
            spec[key] = json!(go_duration(value));
        }
    }
    let certificate = json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "orkestra"}},
        "spec": spec,
    });
    let params = PatchParams::apply(MANAGER).force();
    certificates
        .patch(name, &params, &Patch::Apply(&certificate))
        .await
        .map_err(Error::Request)?;
    Ok(())
}

/// The certificate cert-manager keeps in Secret `name`, once it holds one.
pub async fn current(client: &kube::Client, namespace: &str, name: &str) -> Result<Option<Identity>, kube::Error> {
    let secrets = orkestra_kube::objects::namespaced::<Secret>(client.clone(), namespace)?;
    let Some(secret) = secrets.get_opt(name).await? else {
        return Ok(None);
    };
    let data = secret.data.unwrap_or_default();
    let text = |key: &str| data.get(key).map(|b| String::from_utf8_lossy(&b.0).into_owned());
    let (Some(cert_pem), Some(key_pem)) = (text("tls.crt"), text("tls.key")) else {
        return Ok(None);
    };
    if cert_pem.trim().is_empty() || key_pem.trim().is_empty() {
        return Ok(None);
    }
    let ca_pem = text("ca.crt").filter(|ca| !ca.trim().is_empty());
    Ok(Some(Identity::given(cert_pem, key_pem, ca_pem)))
}

/// Waits for the first certificate in Secret `name`.
pub async fn issued(client: &kube::Client, namespace: &str, name: &str) -> Result<Identity, Error> {
    let deadline = tokio::time::Instant::now() + ISSUE_TIMEOUT;
    let mut said = false;
    loop {
        match current(client, namespace, name).await {
            Ok(Some(identity)) => return Ok(identity),
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "reading the certificate's Secret"),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::NotIssued {
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        }
        if !said {
            tracing::info!(secret = %format!("{namespace}/{name}"), "waiting for cert-manager to issue the webhook certificate");
            said = true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A duration as cert-manager's Go parser takes it (`90d` is not one: hours are).
fn go_duration(text: &str) -> String {
    match orkestra_expr::duration::parse(text) {
        Ok(duration) => format!("{}s", duration.as_secs()),
        Err(_) => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_go_reads_them() {
        assert_eq!(go_duration("90d"), "7776000s");
        assert_eq!(go_duration("1h30m"), "5400s");
    }
}
