//! The Kubernetes client configuration every command uses, named: each request carries
//! `User-Agent: ork/<version> (<command>)`, so an API server's audit log, its metrics and
//! its API priority and fairness rules can tell ork's requests from anyone else's.

use kube::config::InferConfigError;

/// KUBECONFIG or the in-cluster configuration, named for `command`.
pub async fn config(command: &str) -> Result<kube::Config, InferConfigError> {
    Ok(named(kube::Config::infer().await?, command))
}

/// A client on [`config`] for `command`; `needed` says what for, in the error when there is
/// no cluster to talk to.
pub async fn client(command: &str, needed: &str) -> anyhow::Result<kube::Client> {
    use anyhow::Context as _;
    let config = config(command)
        .await
        .with_context(|| format!("{needed} needs a Kubernetes client (KUBECONFIG or the in-cluster config)"))?;
    kube::Client::try_from(config).context("cannot build a Kubernetes client")
}

/// `config` with ork's user agent for `command`.
pub fn named(mut config: kube::Config, command: &str) -> kube::Config {
    let agent = orkestra_kube::user_agent(command);
    // A command name is ours and ASCII; a value that could not be a header is left out.
    if let Ok(value) = http::HeaderValue::from_str(&agent) {
        config.headers.retain(|(name, _)| name != http::header::USER_AGENT);
        config.headers.push((http::header::USER_AGENT, value));
    }
    config
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_named_config_carries_one_user_agent_with_the_version_and_command() {
        let config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        let config = super::named(super::named(config, "dev"), "run");
        let agents: Vec<_> = config
            .headers
            .iter()
            .filter(|(name, _)| name == http::header::USER_AGENT)
            .map(|(_, value)| value.to_str().unwrap().to_string())
            .collect();
        assert_eq!(agents, [format!("ork/{} (run)", env!("CARGO_PKG_VERSION"))]);
    }
}
