//! `gateway` and `security`, at the top level of a Katalog file: the Serve API's tokens, and
//! the admission webhooks the API server calls, and webhook intake ([`Webhooks`]).

use serde::Deserialize;
use serde_json::Value;

use super::Webhooks;

/// `gateway`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gateway {
    /// `false` turns every part of the gateway off (upstream's switch); unset or `true`
    /// leaves each part to its own setting.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Where the gateway is reached: the runtime advertises it on `/katalog` as
    /// `gatewayEndpoint` (when `security.gatewayEndpoint` does not say); nothing calls it.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The Serve API (`/api/v1/...`).
    #[serde(default)]
    pub api: Option<GatewayApi>,
    /// A gateway with no CRDs of its own (protection features only).
    #[serde(default)]
    pub standalone: bool,
    /// Other clusters intents may be applied to, by name (`local` is the gateway's own).
    #[serde(default)]
    pub clusters: std::collections::BTreeMap<String, ClusterEntry>,
    /// Webhook intake from GitHub, GitLab, Slack and signed JSON.
    #[serde(default)]
    pub webhooks: Option<Webhooks>,
    /// The older place of `webhooks`.
    #[serde(default)]
    pub admission: Option<GatewayAdmission>,
}

/// `gateway.admission`: where upstream first put webhook intake.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayAdmission {
    #[serde(default)]
    pub webhooks: Option<Webhooks>,
}

impl Gateway {
    /// Whether the Serve API is open: `api.enabled`, unless `enabled: false` turns the
    /// gateway off.
    pub fn serve_api_open(&self) -> bool {
        self.enabled != Some(false) && self.api.as_ref().is_some_and(|a| a.enabled)
    }

    /// Webhook intake as declared (`webhooks`, else `admission.webhooks`), unless `enabled:
    /// false` turns the gateway off.
    pub fn intake(&self) -> Option<&Webhooks> {
        let declared = self
            .webhooks
            .as_ref()
            .or_else(|| self.admission.as_ref().and_then(|a| a.webhooks.as_ref()));
        declared.filter(|_| self.enabled != Some(false))
    }

    /// Webhook intake when it has an enabled entry (what the gateway serves of it).
    pub fn intake_enabled(&self) -> Option<&Webhooks> {
        self.intake().filter(|w| w.any_enabled())
    }

    /// The Serve API's token entries (`api.auth.tokens`), as declared.
    pub fn tokens(&self) -> &[TokenSource] {
        self.api
            .as_ref()
            .and_then(|a| a.auth.as_ref())
            .map_or(&[], |a| a.tokens.as_slice())
    }

    /// The `gateway` key intake is declared under, for messages.
    pub fn intake_key(&self) -> &'static str {
        match self.webhooks.is_some() {
            true => "gateway.webhooks",
            false => "gateway.admission.webhooks",
        }
    }
}

/// The name of the gateway's own cluster in `serve.clusters` (never declared).
pub const LOCAL_CLUSTER: &str = "local";

/// One cluster of `gateway.clusters`: its API server and one way to reach it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEntry {
    #[serde(default)]
    pub endpoint: String,
    /// A Secret holding a kubeconfig (its cluster, user and TLS settings are used as written).
    #[serde(default)]
    pub secret_ref: Option<SecretKey>,
    /// A Secret holding a bearer token for `endpoint`.
    #[serde(default)]
    pub token_ref: Option<SecretKey>,
    /// A Secret holding the CA (PEM) `endpoint`'s certificate is checked against.
    #[serde(default)]
    pub ca_ref: Option<SecretKey>,
    /// With `tokenRef` only: do not check `endpoint`'s certificate (development clusters).
    #[serde(default)]
    pub insecure: bool,
}

/// A key of a Secret (the namespace defaults to the gateway's).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretKey {
    pub name: String,
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `gateway.api`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayApi {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub auth: Option<ApiAuth>,
}

/// `gateway.api.auth`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiAuth {
    #[serde(default)]
    pub tokens: Vec<TokenSource>,
}

/// One token the Serve API accepts, by name, from exactly one source.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenSource {
    pub name: String,
    /// `${VAR}`: the value of an environment variable of the gateway (a literal value would
    /// put a credential in the Katalog, and is refused).
    #[serde(default)]
    pub token: Option<String>,
    /// A Secret the gateway reads, and creates (and rotates) when it is missing.
    #[serde(default)]
    pub secret_ref: Option<TokenSecret>,
    /// A GitHub Actions OIDC token (issuer `https://token.actions.githubusercontent.com`).
    #[serde(default, rename = "githubOIDC")]
    pub github_oidc: Option<OidcSource>,
    /// A GitLab CI ID token (issuer `url`, default `https://gitlab.com`).
    #[serde(default, rename = "gitlabOIDC")]
    pub gitlab_oidc: Option<OidcSource>,
    /// A Vault identity token (issuer `{url}/v1/{namespace/}identity/oidc`).
    #[serde(default, rename = "vaultOIDC")]
    pub vault_oidc: Option<OidcSource>,
    /// Any OpenID Connect issuer, by discovery.
    #[serde(default)]
    pub oidc: Option<OidcSource>,
}

/// An OIDC token source: whose tokens are accepted, for which audience, with which claims.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OidcSource {
    /// `oidc`: the exact `iss` (required); its keys are found by discovery.
    #[serde(default)]
    pub issuer: Option<String>,
    /// `gitlabOIDC` (default `https://gitlab.com`), `vaultOIDC` (required): the server.
    #[serde(default)]
    pub url: Option<String>,
    /// `vaultOIDC`: the Vault namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// The `aud` a token must carry (not checked when empty).
    #[serde(default)]
    pub audience: Option<String>,
    /// Claims a token must have, each with exactly this value (camelCase keys also match
    /// the snake_case claim: `namespacePath` is `namespace_path`).
    #[serde(default)]
    pub allow: std::collections::BTreeMap<String, Value>,
}

impl OidcSource {
    /// The issuer a token must name, for each kind of source; `None` when one is missing.
    pub fn issuer_for(&self, kind: OidcKind) -> Option<String> {
        let trim = |s: &str| s.trim_end_matches('/').to_string();
        match kind {
            OidcKind::Github => Some("https://token.actions.githubusercontent.com".into()),
            OidcKind::Gitlab => Some(self.url.as_deref().map_or_else(|| "https://gitlab.com".into(), trim)),
            OidcKind::Vault => {
                let url = trim(self.url.as_deref()?);
                Some(
                    match self
                        .namespace
                        .as_deref()
                        .map(|n| n.trim_matches('/'))
                        .filter(|n| !n.is_empty())
                    {
                        Some(namespace) => format!("{url}/v1/{namespace}/identity/oidc"),
                        None => format!("{url}/v1/identity/oidc"),
                    },
                )
            }
            OidcKind::Generic => self.issuer.as_deref().map(trim),
        }
    }
}

/// Which OIDC source a token entry has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OidcKind {
    Github,
    Gitlab,
    Vault,
    Generic,
}

impl OidcKind {
    pub fn key(self) -> &'static str {
        match self {
            OidcKind::Github => "githubOIDC",
            OidcKind::Gitlab => "gitlabOIDC",
            OidcKind::Vault => "vaultOIDC",
            OidcKind::Generic => "oidc",
        }
    }
}

impl TokenSource {
    /// The OIDC source of the entry, if it has one.
    pub fn oidc_source(&self) -> Option<(OidcKind, &OidcSource)> {
        [
            (OidcKind::Github, &self.github_oidc),
            (OidcKind::Gitlab, &self.gitlab_oidc),
            (OidcKind::Vault, &self.vault_oidc),
            (OidcKind::Generic, &self.oidc),
        ]
        .into_iter()
        .find_map(|(kind, source)| source.as_ref().map(|s| (kind, s)))
    }

    /// `VAR` of a `token: "${VAR}"`.
    pub fn env_var(&self) -> Option<&str> {
        let name = self.token.as_deref()?.trim().strip_prefix("${")?.strip_suffix('}')?;
        (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).then_some(name)
    }
}

/// `secretRef` of a token.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenSecret {
    pub name: String,
    /// The data key (default `token`).
    #[serde(default)]
    pub key: Option<String>,
    /// Default: the gateway's own namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// A duration (`30d`): the gateway writes a new token once the one it made is older.
    #[serde(default)]
    pub rotate_after: Option<String>,
}

/// `security`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Security {
    #[serde(default)]
    pub webhooks: Option<WebhookSettings>,
    #[serde(default)]
    pub deletion_protection: Option<DeletionProtection>,
    #[serde(default)]
    pub namespace_protection: Option<NamespaceProtection>,
    #[serde(default)]
    pub conversion: Option<ConversionSettings>,
    /// The Service in front of the gateway (webhooks are then called through it).
    #[serde(default)]
    pub service_name: Option<String>,
    /// Where the gateway is reached, advertised by the runtime on `/katalog`.
    #[serde(default)]
    pub gateway_endpoint: Option<String>,
    /// The webhook server's certificate: issued by cert-manager (`issuerRef`), or made by
    /// the gateway and rotated as upstream's settings say.
    #[serde(default)]
    pub cert_manager: Option<CertManager>,
}

/// `security.certManager`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CertManager {
    /// The cert-manager Issuer or ClusterIssuer that signs the webhook's certificate; the
    /// gateway asks for it with a `Certificate` and serves the Secret cert-manager writes.
    #[serde(default)]
    pub issuer_ref: Option<IssuerRef>,
    /// The Secret cert-manager writes (default `orkestra-gateway-webhook-tls`).
    #[serde(default)]
    pub secret_name: Option<String>,
    /// The certificate's lifetime and when to renew it, as cert-manager reads them.
    #[serde(default)]
    pub duration: Option<String>,
    #[serde(default)]
    pub renew_before: Option<String>,
    /// Upstream's settings for the certificate the gateway makes itself: renew it
    /// (`autoRotate`, default true) `rotationThreshold` before it expires (default a third
    /// of `validFor`), each valid for `validFor` (default `--cert-valid-for`).
    #[serde(default)]
    pub auto_rotate: Option<bool>,
    #[serde(default)]
    pub rotation_threshold: Option<String>,
    #[serde(default)]
    pub valid_for: Option<String>,
}

/// `security.certManager.issuerRef`, as cert-manager's `Certificate` takes it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuerRef {
    pub name: String,
    /// `Issuer` (in the gateway's namespace, the default) or `ClusterIssuer`.
    #[serde(default)]
    pub kind: Option<String>,
    /// Default `cert-manager.io`.
    #[serde(default)]
    pub group: Option<String>,
}

/// `security.webhooks`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSettings {
    #[serde(default)]
    pub admission: Option<Switch>,
    /// What the API server does when the gateway does not answer (default Fail).
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    #[serde(default)]
    pub service_name: Option<String>,
    /// Remove the webhook configurations when the gateway stops (default true).
    #[serde(default)]
    pub cleanup_on_shutdown: Option<bool>,
    /// How long the API server waits for an answer, in seconds (1 to 30, default 5).
    #[serde(default)]
    pub timeout_seconds: Option<u8>,
}

/// `security.deletionProtection`: a DELETE of a Katalog CR (or of a Katalog CRD) labelled
/// [`orkestra_expr::labels::DELETION_PROTECTION`] is refused until the label is removed.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionProtection {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    #[serde(default)]
    pub cleanup_on_shutdown: Option<bool>,
    /// Removing the label is refused too, unless the object also carries
    /// [`orkestra_expr::labels::STRICT_MODE_EXEMPT`].
    #[serde(default)]
    pub strict_mode: bool,
}

/// `security.namespaceProtection`: a create or update of a Katalog CR in a namespace the
/// lists forbid is refused (the CRD's own `runtime` lists win over these).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceProtection {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub restricted_namespaces: Vec<String>,
    #[serde(default)]
    pub allowed_namespaces: Vec<String>,
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    #[serde(default)]
    pub cleanup_on_shutdown: Option<bool>,
}

/// `security.conversion`: the gateway serves `/convert` for the CRDs that declare paths.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionSettings {
    #[serde(default)]
    pub enabled: bool,
    /// How many of the last conversion reviews the gateway's rolling figures cover (default
    /// 100): `webhooks.conversionWindow` on its `/katalog`.
    #[serde(default)]
    pub conversion_window: Option<u32>,
}

/// `deletionProtection` of one CRD (both default to true when the Katalog enables it).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CrdDeletionProtection {
    #[serde(default, rename = "protectCRD")]
    pub protect_crd: Option<bool>,
    #[serde(default, rename = "protectCRs")]
    pub protect_crs: Option<bool>,
}

/// `{enabled: bool}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Switch {
    #[serde(default)]
    pub enabled: bool,
}

/// A webhook's `failurePolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub enum FailurePolicy {
    /// The write is refused while the gateway does not answer.
    #[default]
    Fail,
    /// The write goes through unchecked (the reconcile-time check still runs).
    Ignore,
}

impl FailurePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// `admission.webhooks` of one CRD: which of its rules run at admission.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CrdWebhooks {
    /// Validation rules at admission (default true when the Katalog enables webhooks).
    #[serde(default)]
    pub validation: Option<bool>,
    #[serde(default)]
    pub mutation: Option<bool>,
    /// `CREATE`, `UPDATE` (the default is both).
    #[serde(default)]
    pub operations: Vec<String>,
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
}
