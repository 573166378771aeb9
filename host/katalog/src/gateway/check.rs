//! `gateway` checks: each token has a unique name and exactly one source, and a `token`
//! names an environment variable (`${VAR}`), never the credential itself; namespace
//! protection gives one list, not both.

use std::collections::BTreeSet;

use crate::check::{Checker, item};
use crate::model::{Gateway, LOCAL_CLUSTER, OidcKind, Security};
use crate::yaml::Node;

impl Checker<'_> {
    pub(crate) fn gateway(&mut self, gateway: &Gateway, node: &Node) {
        self.endpoint(gateway.endpoint.as_deref(), "gateway.endpoint", "endpoint", node);
        self.clusters(gateway, node);
        self.intake(gateway, node);
        let Some(auth) = gateway.api.as_ref().and_then(|a| a.auth.as_ref()) else {
            return;
        };
        let list = node
            .get("api")
            .and_then(|a| a.get("auth"))
            .and_then(|a| a.get("tokens"));
        let mut names = BTreeSet::new();
        for (i, token) in auth.tokens.iter().enumerate() {
            let path = format!("gateway.api.auth.tokens[{i}]");
            let token_node = item(list, i).unwrap_or(node);
            let at = |key: &str| token_node.get(key).map_or(token_node.pos, |n| n.pos);
            if token.name.is_empty() || !names.insert(token.name.clone()) {
                self.error(
                    format!("{path}.name"),
                    at("name"),
                    "a token needs a name of its own (names are unique)",
                );
            }
            let sources = [
                token.token.is_some(),
                token.secret_ref.is_some(),
                token.github_oidc.is_some(),
                token.gitlab_oidc.is_some(),
                token.vault_oidc.is_some(),
                token.oidc.is_some(),
            ];
            if sources.iter().filter(|s| **s).count() != 1 {
                self.error(
                    &path,
                    token_node.pos,
                    "give exactly one of token (${VAR}), secretRef, githubOIDC, gitlabOIDC, vaultOIDC, oidc",
                );
            }
            if token.token.is_some() && token.env_var().is_none() {
                self.error(
                    format!("{path}.token"),
                    at("token"),
                    "must name an environment variable (\"${CI_TOKEN}\"): a credential written in the Katalog is refused",
                );
            }
            if let Some((kind, oidc)) = token.oidc_source() {
                let key = kind.key();
                let at_source = token_node.get(key).map_or(token_node.pos, |n| n.pos);
                match oidc.issuer_for(kind) {
                    None => self.error(
                        format!("{path}.{key}"),
                        at_source,
                        match kind {
                            OidcKind::Vault => "url is required (the Vault server)",
                            _ => "issuer is required (the exact iss of the tokens)",
                        },
                    ),
                    Some(issuer) if !secure(&issuer) => self.error(
                        format!("{path}.{key}"),
                        at_source,
                        format!("the issuer {issuer:?} must be https:// (plain http only on a loopback address)"),
                    ),
                    Some(_) => {}
                }
                if kind != OidcKind::Generic && oidc.allow.is_empty() {
                    self.error(
                        format!("{path}.{key}.allow"),
                        at_source,
                        "is required: without it every token the issuer signs (any repository, any project) would be accepted",
                    );
                }
                for (claim, value) in &oidc.allow {
                    if value.is_object() || value.is_array() || value.is_null() {
                        self.error(
                            format!("{path}.{key}.allow.{claim}"),
                            at_source,
                            "a claim is matched against one value (a string, number or bool)",
                        );
                    }
                }
            }
        }
    }

    /// Each cluster has a DNS-label name (not `local`), an endpoint, and one credential form.
    fn clusters(&mut self, gateway: &Gateway, node: &Node) {
        for (name, entry) in &gateway.clusters {
            let path = format!("gateway.clusters.{name}");
            let at = node
                .get("clusters")
                .and_then(|c| c.get(name))
                .map_or(node.pos, |n| n.pos);
            if name == LOCAL_CLUSTER || !orkestra_expr::names::is_dns1123_label(name) {
                self.error(
                    &path,
                    at,
                    "a cluster name is a DNS-1123 label other than \"local\" (the gateway's own cluster)",
                );
            }
            let endpoint = entry.endpoint.trim();
            if !endpoint.starts_with("https://") && !endpoint.starts_with("http://") {
                self.error(
                    format!("{path}.endpoint"),
                    at,
                    "is required: the cluster's API server URL (https://...)",
                );
            }
            let problem = match (&entry.secret_ref, &entry.token_ref, &entry.ca_ref, entry.insecure) {
                (Some(_), None, None, false) => None,
                (Some(_), _, _, true) => {
                    Some("insecure is not valid with secretRef: the kubeconfig holds the TLS settings")
                }
                (Some(_), _, _, _) => Some("give secretRef (a kubeconfig) or tokenRef with caRef, not both"),
                (None, Some(_), Some(_), false) | (None, Some(_), None, true) => None,
                (None, Some(_), Some(_), true) => Some("give caRef or insecure: true, not both"),
                (None, Some(_), None, false) => {
                    Some("tokenRef needs caRef (or insecure: true for a development cluster)")
                }
                (None, None, _, _) => {
                    Some("give exactly one credential form: secretRef (a kubeconfig), or tokenRef with caRef")
                }
            };
            if let Some(message) = problem {
                self.error(&path, at, message);
            }
            for (key, secret) in [
                ("secretRef", &entry.secret_ref),
                ("tokenRef", &entry.token_ref),
                ("caRef", &entry.ca_ref),
            ] {
                if let Some(secret) = secret
                    && (secret.name.is_empty() || secret.key.is_empty())
                {
                    self.error(format!("{path}.{key}"), at, "name and key are required");
                }
            }
        }
    }

    /// Where the gateway is reached, as the runtime advertises it on `/katalog`: an http(s)
    /// URL.
    fn endpoint(&mut self, endpoint: Option<&str>, path: &str, key: &str, node: &Node) {
        let Some(endpoint) = endpoint else { return };
        let host = endpoint
            .strip_prefix("https://")
            .or_else(|| endpoint.strip_prefix("http://"))
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default();
        if host.is_empty() || host.contains(char::is_whitespace) {
            let at = node.get(key).map_or(node.pos, |n| n.pos);
            self.error(
                path,
                at,
                "is the gateway's URL (http:// or https://, then its host), which the runtime advertises on /katalog",
            );
        }
    }

    pub(crate) fn security(&mut self, security: &Security, node: &Node) {
        // The gateway keeps that many reviews in memory.
        if let Some(window) = security.conversion.as_ref().and_then(|c| c.conversion_window)
            && !(1..=MAX_CONVERSION_WINDOW).contains(&window)
        {
            let at = node
                .get("conversion")
                .and_then(|c| c.get("conversionWindow"))
                .map_or(node.pos, |n| n.pos);
            self.error(
                "security.conversion.conversionWindow",
                at,
                format!("is a number of reviews from 1 to {MAX_CONVERSION_WINDOW}"),
            );
        }
        self.endpoint(
            security.gateway_endpoint.as_deref(),
            "security.gatewayEndpoint",
            "gatewayEndpoint",
            node,
        );
        if let Some(certs) = &security.cert_manager {
            self.cert_manager(certs, node.get("certManager").unwrap_or(node));
        }
        if let Some(policy) = &security.namespace_protection
            && !policy.restricted_namespaces.is_empty()
            && !policy.allowed_namespaces.is_empty()
        {
            let at = node.get("namespaceProtection").map_or(node.pos, |n| n.pos);
            self.error(
                "security.namespaceProtection",
                at,
                "give restrictedNamespaces or allowedNamespaces, not both",
            );
        }
    }
}

impl Checker<'_> {
    /// `security.certManager`: an issuer cert-manager can find, durations, and rotation
    /// settings for the gateway's own certificate that can hold.
    fn cert_manager(&mut self, certs: &crate::model::CertManager, node: &Node) {
        let path = "security.certManager";
        for (key, value) in [
            ("duration", &certs.duration),
            ("renewBefore", &certs.renew_before),
            ("rotationThreshold", &certs.rotation_threshold),
            ("validFor", &certs.valid_for),
        ] {
            self.duration(value.as_deref(), &format!("{path}.{key}"), node);
        }
        if let Some(issuer) = &certs.issuer_ref {
            let at = node.get("issuerRef").map_or(node.pos, |n| n.pos);
            if !orkestra_expr::names::is_dns1123_subdomain(&issuer.name) {
                self.error(
                    format!("{path}.issuerRef.name"),
                    at,
                    "names an Issuer or ClusterIssuer (a DNS-1123 name)",
                );
            }
            if let Some(kind) = issuer
                .kind
                .as_deref()
                .filter(|k| !matches!(*k, "Issuer" | "ClusterIssuer"))
            {
                self.error(
                    format!("{path}.issuerRef.kind"),
                    at,
                    format!("is Issuer or ClusterIssuer, not {kind:?}"),
                );
            }
            let own = [
                ("autoRotate", certs.auto_rotate.is_some()),
                ("rotationThreshold", certs.rotation_threshold.is_some()),
                ("validFor", certs.valid_for.is_some()),
            ];
            for (key, _) in own.iter().filter(|(_, set)| *set) {
                self.error(
                    format!("{path}.{key}"),
                    at,
                    "rotates the certificate the gateway makes itself; with issuerRef, cert-manager renews it (set duration and renewBefore)",
                );
            }
        } else if certs.secret_name.is_some() || certs.duration.is_some() || certs.renew_before.is_some() {
            self.error(
                path,
                node.pos,
                "secretName, duration and renewBefore are cert-manager's: give issuerRef too (without it the gateway makes its own certificate)",
            );
        }
        if let Some(name) = certs
            .secret_name
            .as_deref()
            .filter(|n| !orkestra_expr::names::is_dns1123_subdomain(n))
        {
            let at = node.get("secretName").map_or(node.pos, |n| n.pos);
            self.error(
                format!("{path}.secretName"),
                at,
                format!("{name:?} is not a Secret name"),
            );
        }
        let seconds = |text: &Option<String>| text.as_deref().and_then(|t| orkestra_expr::duration::parse(t).ok());
        if let (Some(threshold), Some(valid)) = (seconds(&certs.rotation_threshold), seconds(&certs.valid_for))
            && threshold >= valid
        {
            let at = node.get("rotationThreshold").map_or(node.pos, |n| n.pos);
            self.error(
                format!("{path}.rotationThreshold"),
                at,
                "must be shorter than validFor: the certificate is renewed that long before it expires",
            );
        }
    }
}

/// The most conversion reviews the gateway's rolling figures may cover.
const MAX_CONVERSION_WINDOW: u32 = 10_000;

/// An issuer the gateway may fetch keys from: https, or http on loopback (a test issuer).
pub(super) fn secure(issuer: &str) -> bool {
    if issuer.starts_with("https://") {
        return true;
    }
    let Some(rest) = issuer.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split(['/', ':']).next().unwrap_or_default();
    matches!(host, "127.0.0.1" | "localhost") || rest.starts_with("[::1]")
}
