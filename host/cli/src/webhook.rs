//! `ork webhook list`: webhook intake's entries (`gateway.webhooks`), from the Katalog alone:
//! the path each is served on (what to give the provider), what proves a delivery, what it
//! takes, and what the serve targets grant it (its name is its token).

use std::process::ExitCode;

use clap::{Args, Subcommand};

use orkestra_katalog::model::{Common, Provider, SecretKey};

use crate::katalog_args::KatalogArgs;

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Each webhook intake entry: its path, the Secret that proves a delivery, what it
    /// takes, and what the serve targets grant it.
    List(ListArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
}

pub fn webhook(command: WebhookCommand) -> anyhow::Result<ExitCode> {
    match command {
        WebhookCommand::List(args) => list(args),
    }
}

fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let compiled = args.katalog.load()?;
    let Some(webhooks) = compiled.katalog.gateway.as_ref().and_then(|g| g.intake()) else {
        crate::stdout::write("no webhook intake (gateway.webhooks)\n")?;
        return Ok(ExitCode::SUCCESS);
    };
    let secret = |header: &str, secret: Option<&SecretKey>| match secret {
        Some(s) => format!(
            "{header} with Secret {}/{} key {}",
            s.namespace.as_deref().unwrap_or("<gateway namespace>"),
            s.name,
            s.key
        ),
        None => format!("{header}, but no Secret is declared"),
    };
    let mut out = String::new();
    let mut entry = |common: Common<'_>, checked: String, takes: String| {
        let off = if common.enabled { "" } else { ", off: set enabled: true" };
        out.push_str(&format!("{} ({}{off})\n", common.name, common.provider.key()));
        out.push_str(&format!(
            "  path: POST {}\n  checked with: {checked}\n  takes: {takes}\n",
            common.path()
        ));
        let grants = crate::token::grants_to(&compiled, common.name);
        match grants.is_empty() {
            true => out.push_str("  grants: none (no served target lists it in serve.tokens)\n"),
            false => grants.iter().for_each(|g| out.push_str(&format!("  grants: {g}\n"))),
        }
    };
    for (provider, list) in [
        (Provider::GitHub, &webhooks.github),
        (Provider::GitLab, &webhooks.gitlab),
    ] {
        let header = match provider {
            Provider::GitHub => "X-Hub-Signature-256",
            _ => "X-Gitlab-Token",
        };
        for git in list {
            let repository = git
                .repository(provider)
                .map_or_else(|why| format!("(repository {why})"), |r| r.to_string());
            let takes = format!(
                "pushes of {repository} to {} touching {} (read {})",
                git.branch(),
                git.watch.join(", "),
                match &git.content_token_ref {
                    Some(token) => format!("with the token in Secret {}", token.name),
                    None => "without a token".into(),
                }
            );
            entry(git.common(provider), secret(header, git.secret_ref.as_ref()), takes);
        }
    }
    for slack in &webhooks.slack {
        let commands = match slack.commands.is_empty() {
            true => "any slash command".to_string(),
            false => slack.commands.join(", "),
        };
        let takes = format!("{commands}; results to {}", slack.response_hosts().join(", "));
        let checked = secret("X-Slack-Signature", slack.signing_secret_ref.as_ref());
        entry(slack.common(), checked, takes);
    }
    for generic in &webhooks.generic {
        let checked = secret("X-Orkestra-Signature", generic.secret_ref.as_ref());
        entry(generic.common(), checked, "a signed JSON intent".into());
    }
    crate::stdout::write(&out)?;
    Ok(ExitCode::SUCCESS)
}
