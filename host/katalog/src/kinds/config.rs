//! ConfigMaps, Secrets (from `data`, or a generated certificate) and ServiceAccounts.

use crate::error::Error;
use serde_json::{Value, json};

use super::shorthand::*;
use super::{KindSpec, Shorthand};

pub(super) const CONFIG_MAPS: KindSpec = KindSpec {
    key: "configMaps",
    resource: "configmaps",
    suffix: Some("config"),
    api_version: "v1",
    kind: "ConfigMap",
    namespaced: true,
    pod: false,
    fields: &[
        "data",
        "binaryData",
        "immutable",
        "fromConfigMap",
        "fromNamespace",
        "toNamespaces",
    ],
    render: render_config_maps,
};

fn render_config_maps(s: &Shorthand<'_>) -> Result<Value, Error> {
    Ok(json!({"data": stringify(s.get("data"))}))
}

pub(super) const SECRETS: KindSpec = KindSpec {
    key: "secrets",
    resource: "secrets",
    suffix: Some("secret"),
    api_version: "v1",
    kind: "Secret",
    namespaced: true,
    pod: false,
    fields: &[
        "type",
        "data",
        "stringData",
        "once",
        "rotateAfter",
        "tls",
        "fromSecret",
        "fromNamespace",
        "toNamespaces",
    ],
    render: render_secrets,
};

fn render_secrets(s: &Shorthand<'_>) -> Result<Value, Error> {
    let mut string_data = stringify(s.get("data"));
    if let (Value::Object(target), Value::Object(extra)) = (&mut string_data, stringify(s.get("stringData"))) {
        target.extend(extra);
    }
    let mut secret_type = s.get("type").unwrap_or_else(|| json!("Opaque"));
    if let Some(tls) = s.get("tls") {
        let validity = match s.fields.get("rotateAfter").and_then(Value::as_str) {
            Some(text) => {
                Some(orkestra_expr::duration::parse(text).map_err(|e| Error::Render(format!("rotateAfter: {e}")))?)
            }
            None => None,
        };
        if let Value::Object(target) = &mut string_data {
            target.extend((s.certify)(&tls, validity).map_err(Error::Render)?);
        }
        secret_type = json!("kubernetes.io/tls");
    }
    Ok(json!({"type": secret_type, "stringData": string_data}))
}

pub(super) const SERVICE_ACCOUNTS: KindSpec = KindSpec {
    key: "serviceAccounts",
    resource: "serviceaccounts",
    suffix: Some("sa"),
    api_version: "v1",
    kind: "ServiceAccount",
    namespaced: true,
    pod: false,
    fields: &["imagePullSecrets", "automountServiceAccountToken"],
    render: render_service_accounts,
};

fn render_service_accounts(s: &Shorthand<'_>) -> Result<Value, Error> {
    let mut body = json!({});
    if let Some(secrets) = s.fields.get("imagePullSecrets").and_then(Value::as_array) {
        body["imagePullSecrets"] = Value::Array(
            secrets
                .iter()
                .map(|s| if s.is_string() { json!({"name": s}) } else { s.clone() })
                .collect(),
        );
    }
    if let Some(automount) = s.get("automountServiceAccountToken") {
        body["automountServiceAccountToken"] = automount;
    }
    Ok(body)
}
