//! External HTTP calls (`external:` of a block or a gate), compiled. Making them is the
//! runtime's; here the method, URL, headers, body, timeout and accepted codes are checked.

use std::time::Duration;

use serde_json::Value;

use super::{Error, conditions, template};
use crate::model::ExternalCall;
use orkestra_expr::condition::Conditions;
use orkestra_expr::template::{Functions, Template};
use orkestra_expr::tree::Tree;

/// Default per-call timeout (upstream's code default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// One call, compiled.
#[derive(Debug, Clone)]
pub struct Call {
    pub name: String,
    pub url: Template,
    /// An HTTP method token, uppercase (`GET`, `POST`, or an extension method).
    pub method: String,
    pub headers: Vec<(String, Template)>,
    pub body: Option<Tree>,
    pub timeout: Duration,
    /// Accepted status codes; empty means any 2xx.
    pub expected: Vec<u16>,
    pub continue_on_error: bool,
    pub conditions: Conditions,
}

impl Call {
    pub fn compile(spec: &ExternalCall, functions: &Functions) -> Result<Self, Error> {
        if let Some(protocol) = spec.protocol.as_deref().filter(|p| *p != "http") {
            return Err(Error::at(
                "protocol",
                format!("{protocol} is not supported yet (http is)"),
            ));
        }
        let url = spec.url.as_deref().ok_or_else(|| Error::at("url", "is required"))?;
        let method = spec.method.as_deref().unwrap_or("GET").to_uppercase();
        // RFC 9110 token characters: what an HTTP client accepts as a method.
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if method.is_empty() || !method.chars().all(token) {
            return Err(Error::at("method", format!("{method:?} is not an HTTP method")));
        }
        let status = |value: &Value| {
            value
                .as_u64()
                .filter(|code| (100..=599).contains(code))
                .map(|code| code as u16)
                .ok_or_else(|| {
                    Error::at(
                        "expectedStatus",
                        format!("{value} is not an HTTP status code (100 to 599)"),
                    )
                })
        };
        let expected = match &spec.expected_status {
            None => Vec::new(),
            Some(Value::Array(list)) => list.iter().map(status).collect::<Result<_, _>>()?,
            Some(one) => vec![status(one)?],
        };
        Ok(Self {
            name: spec.name.clone(),
            url: template(url, functions).map_err(|e| e.within("url"))?,
            method,
            headers: {
                let mut headers = spec
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        let compiled = template(v, functions).map_err(|e| e.within(k).within("headers"))?;
                        Ok((k.clone(), compiled))
                    })
                    .collect::<Result<Vec<_>, Error>>()?;
                if let Some(token) = &spec.token
                    && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                {
                    let bearer = template(&format!("Bearer {token}"), functions).map_err(|e| e.within("token"))?;
                    headers.push(("Authorization".into(), bearer));
                }
                headers
            },
            body: spec
                .body
                .as_ref()
                .map(|b| super::tree(b, functions).map_err(|e| e.within("body")))
                .transpose()?,
            timeout: match &spec.timeout {
                Some(text) => orkestra_expr::duration::parse(text).map_err(|e| Error::at("timeout", e))?,
                None => DEFAULT_TIMEOUT,
            },
            expected,
            continue_on_error: spec.continue_on_error,
            conditions: conditions(&spec.when, &spec.or, functions)?,
        })
    }

    /// Whether a response with `status` counts as success.
    pub fn accepts(&self, status: u16) -> bool {
        match self.expected.is_empty() {
            true => (200..300).contains(&status),
            false => self.expected.contains(&status),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(yaml: &str) -> Result<Call, String> {
        let node = crate::yaml::parse(yaml).unwrap();
        let (spec, problems) = crate::de::read::<ExternalCall>(&node, "").unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        Call::compile(&spec, Functions::builtin()).map_err(|e| e.to_string())
    }

    #[test]
    fn expected_status_defaults_to_2xx_and_bad_settings_are_named() {
        let plain = call("{name: a, url: 'http://x/{{ .metadata.name }}'}").unwrap();
        assert!(plain.accepts(204) && !plain.accepts(404));
        let listed = call("{name: a, url: 'http://x', expectedStatus: [200, 404]}").unwrap();
        assert!(listed.accepts(404) && !listed.accepts(201));
        let protocol = call("{name: a, url: 'http://x', protocol: redis}").unwrap_err();
        assert_eq!(protocol, "protocol: redis is not supported yet (http is)");
        assert_eq!(call("{name: a}").unwrap_err(), "url: is required");
        assert!(
            call("{name: a, url: 'http://x', timeout: soon}")
                .unwrap_err()
                .starts_with("timeout: ")
        );
        assert!(
            call("{name: a, url: 'http://x', method: 'GE T'}")
                .unwrap_err()
                .starts_with("method: ")
        );
        let single = call("{name: a, url: 'http://x', expectedStatus: 404}").unwrap();
        assert!(single.accepts(404) && !single.accepts(200));
        for bad in ["-1", "70000", "2.5", "[200, ok]"] {
            let error = call(&format!("{{name: a, url: 'http://x', expectedStatus: {bad}}}")).unwrap_err();
            assert!(
                error.starts_with("expectedStatus: ") && error.contains("is not an HTTP status code"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn a_token_becomes_a_bearer_header_unless_one_is_written() {
        let cr = serde_json::json!({"spec": {"key": "s3cret"}});
        let resolver = orkestra_expr::resolver::Resolver::new(&cr, &[]);
        let with_token = call("{name: a, url: 'http://x', token: '{{ .spec.key }}'}").unwrap();
        let sent: Vec<(String, String)> = with_token
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), resolver.render(v).unwrap()))
            .collect();
        assert_eq!(sent, [("Authorization".to_string(), "Bearer s3cret".to_string())]);
        let written = call("{name: a, url: 'http://x', token: t, headers: {authorization: Basic x}}").unwrap();
        assert_eq!(written.headers.len(), 1, "the written header wins");
    }
}
