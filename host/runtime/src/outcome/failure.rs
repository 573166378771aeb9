//! Why a reconcile failed: one [`Reason`] (the Ready condition's reason, and the label set
//! of failure counts), a bounded message, and the API server's answer when one caused it,
//! so the Kordinator can run again at once after a stale write, back off while the server
//! is busy, and report a refusal (403, 404, 422, an apply conflict) as what it is.

use std::fmt;
use std::sync::Arc;

use orkestra_expr::text::bounded;

/// Why a reconcile failed. Every reason but [`Reason::Component`] is one of a fixed set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A template (a resource, a label, args, an onDelete Job) did not render.
    RenderFailed,
    /// The API server refused or failed a write of a child.
    ApplyFailed,
    /// A child's kind is not served by the API server.
    UnknownKind,
    /// A child exists and is not provably this CR's; it is left alone.
    NotOwned,
    /// Deleting a child failed.
    DeleteFailed,
    /// A deny rule matched.
    ValidationFailed,
    /// Writing the CR's status failed.
    StatusPatchFailed,
    /// Writing the CR's metadata (finalizers, labels, mutations, stamps) failed.
    MetadataPatchFailed,
    /// An `external` call failed and is not allowed to.
    ExternalCallFailed,
    /// The source of a `fromConfigMap`/`fromSecret` copy is missing, unreadable, or in a
    /// namespace the CR may not name.
    CopySourceFailed,
    /// A template put a child (`namespace`, `toNamespaces`) in a namespace the Katalog does
    /// not let a custom resource pick.
    NamespaceRefused,
    /// onDelete Jobs did not finish within their deadline.
    DeletionTimedOut,
    /// A component's on-delete has not succeeded within its deadline (`onTimeout: block`).
    DeletionBlocked,
    /// The component is not loaded (its declaration failed, or it is still loading).
    ComponentUnavailable,
    /// The component asked for something outside its grants.
    ComponentForbidden,
    /// The component returned something that is not a valid result.
    ComponentBadResult,
    /// Applying the component's children took longer than `applyTimeout`.
    ComponentApplyTimeout,
    /// The component exceeded a count limit (children, events, kube calls).
    ComponentLimitExceeded,
    /// A call ran past its `timeout`.
    ComponentTimeout,
    /// A call needed more than its `memory`.
    ComponentMemoryLimit,
    /// A call burnt its `limits.fuel`.
    ComponentFuelExhausted,
    /// A call trapped.
    ComponentTrapped,
    /// A call's result was larger than `resultSize`.
    ComponentResultTooLarge,
    /// The component's own reason (ASCII letters and digits, at most 64), shown on Ready.
    /// Counted as `ComponentFailed`, so no guest can grow the label set.
    Component(String),
    /// The run stopped early (shutdown, or the CR is being deleted): not a failure.
    Interrupted,
    /// A step of the run panicked (a defect of the host): counted, and the item retried.
    Panicked,
}

/// Longest reason a component may give.
const COMPONENT_REASON_LIMIT: usize = 64;
/// Longest message kept: it may carry a guest's text, and it reaches logs, Events and the
/// health board on every retry.
const MESSAGE_LIMIT: usize = 1024;

/// A guest's reason (of a failure or an Event) as a Kubernetes reason: ASCII letters and
/// digits, at most 64 (`ComponentError` if none are left).
pub fn guest_reason(reason: &str) -> String {
    let cleaned: String = reason
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(COMPONENT_REASON_LIMIT)
        .collect();
    if cleaned.is_empty() {
        "ComponentError".into()
    } else {
        cleaned
    }
}

impl Reason {
    /// Whether the failure is what a component itself did (trapped, ran past a limit, returned
    /// something invalid or an error of its own), as opposed to a template, the cluster or
    /// the runtime: what a rollout judges a version on.
    pub fn is_component_fault(&self) -> bool {
        matches!(
            self,
            Reason::ComponentForbidden
                | Reason::ComponentBadResult
                | Reason::ComponentLimitExceeded
                | Reason::ComponentTimeout
                | Reason::ComponentMemoryLimit
                | Reason::ComponentFuelExhausted
                | Reason::ComponentTrapped
                | Reason::ComponentResultTooLarge
                | Reason::Component(_)
        )
    }

    /// A component's own failure reason.
    pub fn component(reason: &str) -> Self {
        Reason::Component(guest_reason(reason))
    }

    /// As written on the Ready condition.
    pub fn as_str(&self) -> &str {
        match self {
            Reason::Component(reason) => reason,
            fixed => fixed.label(),
        }
    }

    /// The bounded label failures are counted under.
    pub fn label(&self) -> &'static str {
        match self {
            Reason::RenderFailed => "RenderFailed",
            Reason::ApplyFailed => "ApplyFailed",
            Reason::UnknownKind => "UnknownKind",
            Reason::NotOwned => "NotOwned",
            Reason::DeleteFailed => "DeleteFailed",
            Reason::ValidationFailed => "ValidationFailed",
            Reason::StatusPatchFailed => "StatusPatchFailed",
            Reason::MetadataPatchFailed => "MetadataPatchFailed",
            Reason::ExternalCallFailed => "ExternalCallFailed",
            Reason::CopySourceFailed => "CopySourceFailed",
            Reason::NamespaceRefused => "NamespaceRefused",
            Reason::DeletionTimedOut => "DeletionTimedOut",
            Reason::DeletionBlocked => "DeletionBlocked",
            Reason::ComponentUnavailable => "ComponentUnavailable",
            Reason::ComponentForbidden => "ComponentForbidden",
            Reason::ComponentFuelExhausted => "ComponentFuelExhausted",
            Reason::ComponentBadResult => "ComponentBadResult",
            Reason::ComponentApplyTimeout => "ComponentApplyTimeout",
            Reason::ComponentLimitExceeded => "ComponentLimitExceeded",
            Reason::ComponentTimeout => "ComponentTimeout",
            Reason::ComponentMemoryLimit => "ComponentMemoryLimit",
            Reason::ComponentTrapped => "ComponentTrapped",
            Reason::ComponentResultTooLarge => "ComponentResultTooLarge",
            Reason::Component(_) => "ComponentFailed",
            Reason::Interrupted => "Interrupted",
            Reason::Panicked => "Panicked",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a failure means for the next run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// The CR changed under a write that named its resourceVersion (409): run again as soon
    /// as the watch has the new version; nothing failed.
    Soon,
    /// The API server is busy or unreachable (429, 5xx, no answer): back off, and do not
    /// blame the operator for it.
    Backoff,
    /// Anything else (a refusal that repeats until something changes, a failure of the
    /// operator's own): report it, retry on the failure schedule.
    Report,
}

/// A failed reconcile.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct ReconcileError {
    pub reason: Reason,
    pub message: String,
    /// The API server's answer, when one caused the failure.
    #[source]
    pub source: Option<Arc<kube::Error>>,
    /// Whether the write that failed named the CR's resourceVersion (so a 409 means the CR
    /// changed, not a conflict with another field manager).
    stale_write: bool,
}

impl ReconcileError {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: bounded(message.into(), MESSAGE_LIMIT),
            source: None,
            stale_write: false,
        }
    }

    /// A failure the API server answered; `context` says what was being done.
    pub fn api(reason: Reason, context: impl fmt::Display, error: kube::Error) -> Self {
        let what = match status_code(&error) {
            Some(403) => "forbidden: ",
            Some(404) => "not found: ",
            Some(409) => "conflict: ",
            Some(422) => "invalid: ",
            Some(429) => "the API server is throttling: ",
            Some(code) if code >= 500 => "the API server failed: ",
            _ => "",
        };
        let mut failure = Self::new(reason, format!("{context}: {what}{error}"));
        failure.source = Some(Arc::new(error));
        failure
    }

    /// [`ReconcileError::api`] for a write of the CR that carried its resourceVersion.
    pub fn stale(reason: Reason, context: impl fmt::Display, error: kube::Error) -> Self {
        let mut failure = Self::api(reason, context, error);
        failure.stale_write = true;
        failure
    }

    /// The HTTP status the API server answered with, if it answered.
    pub fn status_code(&self) -> Option<u16> {
        self.source.as_deref().and_then(status_code)
    }

    pub fn retry(&self) -> Retry {
        match (self.status_code(), self.source.as_deref()) {
            (Some(409), _) if self.stale_write => Retry::Soon,
            (Some(429), _) => Retry::Backoff,
            (Some(code), _) if code >= 500 => Retry::Backoff,
            // No answer at all: the connection failed or timed out.
            (None, Some(kube::Error::HyperError(_) | kube::Error::Service(_))) => Retry::Backoff,
            _ => Retry::Report,
        }
    }
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(response) => Some(response.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orkestra_kube::transient::refusal as answered;

    #[test]
    fn the_answer_decides_the_retry() {
        let stale = ReconcileError::stale(Reason::MetadataPatchFailed, "web", answered(409));
        assert_eq!(stale.retry(), Retry::Soon);
        let conflict = ReconcileError::api(Reason::ApplyFailed, "ConfigMap web", answered(409));
        assert_eq!(
            conflict.retry(),
            Retry::Report,
            "an apply conflict repeats until someone acts"
        );
        assert!(
            conflict.message.starts_with("ConfigMap web: conflict: "),
            "{}",
            conflict.message
        );
        for code in [429, 500, 503] {
            assert_eq!(
                ReconcileError::api(Reason::ApplyFailed, "x", answered(code)).retry(),
                Retry::Backoff
            );
        }
        for code in [403, 404, 422] {
            let error = ReconcileError::api(Reason::ApplyFailed, "x", answered(code));
            assert_eq!((error.retry(), error.status_code()), (Retry::Report, Some(code)));
        }
        assert_eq!(ReconcileError::new(Reason::RenderFailed, "no").retry(), Retry::Report);
    }

    #[test]
    fn a_component_cannot_grow_the_label_set() {
        let reason = Reason::component("Disk Full!; DROP TABLE");
        assert_eq!(reason.as_str(), "DiskFullDROPTABLE");
        assert_eq!(reason.label(), "ComponentFailed");
        assert_eq!(Reason::component("  ").as_str(), "ComponentError");
        assert_eq!(Reason::component(&"x".repeat(500)).as_str().len(), 64);
    }
}
