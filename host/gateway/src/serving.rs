//! Which of the gateway's webhooks a Katalog turns on, each decided once, from the Katalog
//! alone: the admission rules, conversion, deletion and namespace protection, and provenance
//! (guarded whenever anything of the gateway writes it, the Serve API or webhook intake, and
//! then on every CRD: see [`crate::provenance`]). [`any`] is whether the webhook server
//! runs at all. Every module that registers, serves or guards reads its switch here.

use orkestra_katalog::Compiled;

/// Whether the admission rules' webhooks are on (`security.webhooks.admission.enabled`).
pub fn rules(compiled: &Compiled) -> bool {
    compiled
        .katalog
        .security
        .as_ref()
        .and_then(|s| s.webhooks.as_ref())
        .and_then(|w| w.admission)
        .is_some_and(|a| a.enabled)
}

/// Whether the Katalog turns the conversion webhook on.
pub fn conversion(compiled: &Compiled) -> bool {
    compiled
        .katalog
        .security
        .as_ref()
        .and_then(|s| s.conversion.as_ref())
        .is_some_and(|c| c.enabled)
}

/// Whether the Katalog opens the Serve API (`gateway.api.enabled`).
pub fn serve_api_open(compiled: &Compiled) -> bool {
    compiled
        .katalog
        .gateway
        .as_ref()
        .is_some_and(orkestra_katalog::Gateway::serve_api_open)
}

/// Whether anything of the gateway writes provenance: the Serve API, or webhook intake
/// (which applies through it).
pub fn writes_provenance(compiled: &Compiled) -> bool {
    serve_api_open(compiled)
        || compiled
            .katalog
            .gateway
            .as_ref()
            .is_some_and(|g| g.intake_enabled().is_some())
}

/// Whether the Katalog has anything for the webhook server to serve: admission rules,
/// provenance, protection, or the conversion of a CRD that declares one.
pub fn any(compiled: &Compiled) -> bool {
    rules(compiled)
        || writes_provenance(compiled)
        || crate::protection::deletion(compiled).is_some()
        || crate::protection::namespaces(compiled).is_some()
        || (conversion(compiled) && compiled.enabled().any(|crd| crd.conversion.is_some()))
}
