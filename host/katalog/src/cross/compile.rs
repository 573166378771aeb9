//! `observe.cross` entries, compiled: which CRD a CR reads, under what name, and the
//! templates that pick the CR. Reading is the runtime's: from its own caches, or, with
//! `source:`, from another runtime's Live API over HTTP (ONCOP).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::gather::{Error, template};
use crate::model::{CrossSource, CrossSpec};
use orkestra_expr::template::{Functions, Template};

/// One `observe.cross` entry, compiled.
#[derive(Debug, Clone)]
pub struct CrossRead {
    pub crd: String,
    pub as_: String,
    pub name: Option<Template>,
    pub namespace: Option<Template>,
    pub match_labels: BTreeMap<String, String>,
    /// Read from another runtime instead of this process.
    pub remote: Option<Remote>,
}

/// A read from another runtime's Live API.
#[derive(Debug, Clone)]
pub struct Remote {
    /// The URL: `source.endpoint` as written, else built from `host`, the CRD, the
    /// protocol and the selector.
    pub url: Template,
    pub protocol: Protocol,
    /// How long an answer is reused (`cacheFor`, default 30s).
    pub cache_for: Duration,
    /// A bearer token: `auth: {token: ...}` (templated) or `auth: {fromEnv: VAR}`.
    pub token: Option<Token>,
}

/// What a remote read asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// One CR: `/katalog/{crd}/cr/{ns}/{name}`.
    Cr,
    /// The CRD's health: `/katalog/{crd}/health`.
    Health,
    /// The CRD's live metrics: `/katalog/{crd}` (its `metrics`).
    Metrics,
    /// Everything `/katalog/{crd}` says of the CRD (config and live stats).
    Info,
    /// One CR's recent events: `/katalog/{crd}/cr/{ns}/{name}/events`.
    Events,
}

#[derive(Debug, Clone)]
pub enum Token {
    Written(Template),
    FromEnv(String),
}

/// The protocols of a remote read.
const PROTOCOLS: [&str; 5] = ["cr", "health", "metrics", "info", "events"];

/// How long a remote answer is reused when `cacheFor` is not given.
pub const DEFAULT_CACHE_FOR: Duration = Duration::from_secs(30);

impl CrossRead {
    pub fn compile(spec: &CrossSpec, functions: &Functions) -> Result<Self, Error> {
        // A read by labelSelector was given its CRD at load; one that matched none or
        // several was reported there.
        let Some(crd) = spec.crd.clone() else {
            return Err(Error::at("labelSelector", "matches no single CRD of the Katalog"));
        };
        let selector = spec.selector.clone().unwrap_or(Value::Null);
        let compile = |key: &str| {
            selector[key]
                .as_str()
                .map(|text| template(text, functions).map_err(|e| e.within(key).within("selector")))
                .transpose()
        };
        let match_labels = selector["matchLabels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        let remote = match &spec.source {
            Some(source) => Some(Remote::compile(source, &crd, &selector, functions).map_err(|e| e.within("source"))?),
            None => None,
        };
        Ok(Self {
            remote,
            as_: spec.as_.clone().unwrap_or_else(|| crd.clone()),
            name: compile("name")?,
            namespace: compile("namespace")?,
            match_labels,
            crd,
        })
    }
}

impl Remote {
    fn compile(source: &CrossSource, crd: &str, selector: &Value, functions: &Functions) -> Result<Self, Error> {
        let protocol = match source.protocol.as_deref().unwrap_or("cr") {
            "cr" => Protocol::Cr,
            "health" => Protocol::Health,
            "metrics" => Protocol::Metrics,
            "info" => Protocol::Info,
            "events" => Protocol::Events,
            other => {
                let best = orkestra_expr::text::closest(other, &PROTOCOLS).unwrap_or("cr");
                return Err(Error::at(
                    "protocol",
                    format!(
                        "{other} is not a protocol; the closest is {best} (one of {})",
                        PROTOCOLS.join(", ")
                    ),
                ));
            }
        };
        let url = match (&source.endpoint, &source.host) {
            (Some(endpoint), _) => endpoint.clone(),
            (None, Some(host)) => {
                let host = host.trim_end_matches('/');
                match protocol {
                    Protocol::Cr | Protocol::Events => {
                        let name = selector["name"].as_str().ok_or_else(|| {
                            Error::at(
                                "host",
                                "a cr or events read by host needs selector.name (or give endpoint)",
                            )
                        })?;
                        let namespace = selector["namespace"].as_str().unwrap_or("{{ .metadata.namespace }}");
                        let events = if protocol == Protocol::Events { "/events" } else { "" };
                        format!("{host}/katalog/{crd}/cr/{namespace}/{name}{events}")
                    }
                    Protocol::Health => format!("{host}/katalog/{crd}/health"),
                    Protocol::Metrics | Protocol::Info => format!("{host}/katalog/{crd}"),
                }
            }
            (None, None) => {
                return Err(Error::at(
                    "endpoint",
                    "a read from another runtime needs endpoint or host",
                ));
            }
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Error::at("endpoint", format!("{url} is not an http(s) URL")));
        }
        let token = match &source.auth {
            None => None,
            Some(auth) => match (auth["token"].as_str(), auth["fromEnv"].as_str()) {
                (Some(token), _) => Some(Token::Written(
                    template(token, functions).map_err(|e| e.within("auth.token"))?,
                )),
                (None, Some(var)) => Some(Token::FromEnv(var.to_string())),
                (None, None) => return Err(Error::at("auth", "give token (templated) or fromEnv (a variable name)")),
            },
        };
        Ok(Self {
            url: template(&url, functions).map_err(|e| e.within("endpoint"))?,
            protocol,
            cache_for: match &source.cache_for {
                Some(text) => orkestra_expr::duration::parse(text).map_err(|e| Error::at("cacheFor", e))?,
                None => DEFAULT_CACHE_FOR,
            },
            token,
        })
    }
}
