//! A Slack slash command: its form fields, its text read as `<target> key=value ...` (quotes
//! as a shell takes them), and the `response_url` its result goes to, checked against the
//! entry's hosts so a delivery cannot point the gateway anywhere else.

use serde_json::{Map, Value};

/// The fields of a slash command the gateway reads.
#[derive(Debug, Default)]
pub struct Command {
    pub command: String,
    pub text: String,
    pub response_url: String,
    pub user_name: String,
}

/// How to write a command, for a reply.
pub fn usage(command: &str) -> String {
    format!("usage: {command} <target> key=value ... (quote a value with spaces: note=\"two words\")")
}

/// The intent a command's text says, or why it says none.
pub fn intent(text: &str) -> Result<Map<String, Value>, String> {
    let words = shlex::split(text).ok_or("unbalanced quotes")?;
    let mut words = words.into_iter();
    let target = words.next().ok_or("no target given")?;
    if target.contains('=') {
        return Err(format!("the first word is the target, not {target:?}"));
    }
    let mut intent = Map::from_iter([("target".to_string(), Value::String(target))]);
    for word in words {
        let Some((key, value)) = word.split_once('=') else {
            return Err(format!("{word:?} is not key=value"));
        };
        if key.is_empty() || key == "target" {
            return Err(format!("{word:?}: a field name before '=' (not target)"));
        }
        if intent
            .insert(key.to_string(), Value::String(value.to_string()))
            .is_some()
        {
            return Err(format!("{key} is given twice"));
        }
    }
    Ok(intent)
}

/// The `response_url` when it is https (or http on loopback) to one of `hosts`.
pub fn response_url(url: &str, hosts: &[String]) -> Result<reqwest::Url, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("response_url: {e}"))?;
    let host = parsed.host_str().unwrap_or_default();
    let authority = match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    let loopback = matches!(host, "127.0.0.1" | "localhost" | "[::1]");
    let scheme_ok = parsed.scheme() == "https" || (parsed.scheme() == "http" && loopback);
    let allowed = hosts.iter().any(|h| *h == authority || *h == host);
    if !scheme_ok || !allowed || !parsed.username().is_empty() {
        return Err(format!(
            "response_url {authority:?} is not one of the entry's responseHosts ({})",
            hosts.join(", ")
        ));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_a_target_and_fields() {
        let made = intent(r#"site name=blog replicas=3 note="two words""#).unwrap();
        assert_eq!(
            Value::Object(made),
            serde_json::json!({"target": "site", "name": "blog", "replicas": "3", "note": "two words"})
        );
        assert_eq!(intent("").unwrap_err(), "no target given");
        assert_eq!(intent("site name").unwrap_err(), "\"name\" is not key=value");
        assert_eq!(intent("site a=1 a=2").unwrap_err(), "a is given twice");
        assert_eq!(
            intent("site target=x").unwrap_err(),
            "\"target=x\": a field name before '=' (not target)"
        );
        assert_eq!(
            intent("name=blog").unwrap_err(),
            "the first word is the target, not \"name=blog\""
        );
        assert_eq!(intent("site note=\"open").unwrap_err(), "unbalanced quotes");
    }

    #[test]
    fn results_go_only_to_the_entrys_hosts() {
        let slack = ["hooks.slack.com".to_string()];
        assert!(response_url("https://hooks.slack.com/commands/T1/2/abc", &slack).is_ok());
        for bad in [
            "http://hooks.slack.com/commands/x",
            "https://hooks.slack.com.evil.io/x",
            "https://evil.io/x",
            "https://user@hooks.slack.com/x",
            "not a url",
        ] {
            assert!(response_url(bad, &slack).is_err(), "{bad}");
        }
        let local = ["127.0.0.1:8099".to_string()];
        assert!(response_url("http://127.0.0.1:8099/r", &local).is_ok());
        assert!(response_url("http://127.0.0.1:8098/r", &local).is_err());
    }
}
