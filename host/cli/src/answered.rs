//! Which Katalog's gateway answered a Serve API call (`ork serve`, `ork token probe`): a
//! caller may have reached another gateway than it meant to.

/// The Katalog whose gateway sent `response` (its [`orkestra_gateway::api::KATALOG_HEADER`],
/// on every call it admitted); an error when it is not `want`, or when an answer it admitted
/// names none (something else answers at `url`).
pub fn answered_by(response: &reqwest::Response, url: &str, want: Option<&str>) -> anyhow::Result<Option<String>> {
    let named = response
        .headers()
        .get(orkestra_gateway::api::KATALOG_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match (&named, want) {
        (None, _) if response.status().is_success() => anyhow::bail!(
            "{url} is not an Orkestra Serve API (its answer names no Katalog); give the gateway's --gateway URL"
        ),
        (None, Some(want)) => anyhow::bail!(
            "{url} answered {} without naming a Katalog, so whether it serves Katalog {want:?} is unknown",
            response.status()
        ),
        (Some(name), Some(want)) if name != want => anyhow::bail!(
            "the gateway at {url} serves Katalog {name:?}, not {want:?} (give the --gateway URL of the one that serves it)"
        ),
        _ => Ok(named),
    }
}
