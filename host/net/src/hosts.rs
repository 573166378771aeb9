//! Host allow-lists. A page on another origin can make a browser talk to a loopback door
//! under the attacker's own name (DNS rebinding): the Host header is the one thing that
//! tells. A door without credentials answers only the names it is reached by.

use http::HeaderMap;
use http::header::HOST;

/// The names (host names or IP addresses, without a port) a door answers to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hosts {
    names: Vec<String>,
    /// Any loopback address or `*.localhost` name.
    loopback: bool,
}

impl Hosts {
    /// `localhost`, `*.localhost` and loopback addresses (127.0.0.0/8, ::1).
    pub fn loopback() -> Self {
        Self {
            names: Vec::new(),
            loopback: true,
        }
    }

    /// These names too (`cc.example.com`), as given on the command line.
    pub fn with(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.names
            .extend(names.into_iter().map(|n| n.into().trim().to_ascii_lowercase()));
        self
    }

    /// Whether a request with these headers may be answered: its Host names an allowed host.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(HOST).and_then(|v| v.to_str().ok()).map(host_of) else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        (self.loopback && is_loopback(&host)) || self.names.contains(&host)
    }

    /// The allowed names, for a refusal's message.
    pub fn describe(&self) -> String {
        let mut names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        if self.loopback {
            names.insert(0, "localhost and loopback addresses");
        }
        names.join(", ")
    }
}

/// `host` of `host:port`, `[v6]:port`, `host` or `[v6]`.
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn host(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn a_loopback_door_answers_only_loopback_names() {
        let hosts = Hosts::loopback();
        for ok in [
            "127.0.0.1:8080",
            "localhost:8081",
            "LOCALHOST",
            "[::1]:8080",
            "127.1.2.3",
            "cc.localhost",
        ] {
            assert!(hosts.admits(&host(ok)), "{ok}");
        }
        for bad in [
            "attacker.example:8080",
            "10.0.0.1",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
        ] {
            assert!(!hosts.admits(&host(bad)), "{bad}");
        }
        assert!(!hosts.admits(&HeaderMap::new()), "no Host at all");
        let named = Hosts::loopback().with(["CC.example.com"]);
        assert!(named.admits(&host("cc.example.com:443")));
        assert!(named.describe().contains("cc.example.com"));
    }
}
