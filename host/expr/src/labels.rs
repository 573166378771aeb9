//! The labels, annotations and finalizers the runtime reads and writes (names follow
//! upstream Orkestra so Katalogs and tooling carry over).

/// On every child and on every CR the runtime manages.
pub const MANAGED_LABEL: &str = "orkestra.orkspace.io/managed";
/// On every child: the owning CR's name. Upstream's owner label, kept for the tools that
/// select on it; never enough on its own to prove ownership (see `orkestra_katalog::ownership`).
pub const OWNER_NAME_LABEL: &str = "orkestra-owner";
/// On every child: the owning CR's UID.
pub const OWNER_UID_LABEL: &str = "orkestra.orkspace.io/owner-uid";
/// On every child: the owning CR's `Kind.group`.
pub const OWNER_KIND_LABEL: &str = "orkestra.orkspace.io/owner-kind";
/// On a child of a CRD with serve targets: the surface (target, or "" for the CRD's own box)
/// whose templates made it. A CR moved to another surface loses the children only the
/// previous one made (unless `apply.overrides.keepPreviousSurface`).
pub const SURFACE_LABEL: &str = "orkestra.orkspace.io/surface";
/// Serve target the gateway routed a CR through.
pub const SERVE_TARGET: &str = "orkestra.orkspace.io/serve-target";
/// Serve alias the gateway routed a CR through (empty for the primary target).
pub const SERVE_ALIAS: &str = "orkestra.orkspace.io/serve-alias";
/// Verified identity (OIDC `sub`) or webhook entry that produced the CR.
pub const SERVE_SOURCE: &str = "orkestra.orkspace.io/serve-source";
/// The raw gateway intent (JSON), readable as `.request`.
pub const SERVE_INTENT: &str = "orkestra.orkspace.io/serve-intent";
/// Health of the CRD stamped on each CR after reconcile (JSON), readable as `.health`.
pub const HEALTH: &str = "orkestra.orkspace.io/health";
/// Metrics of the CRD stamped on each CR after reconcile (JSON), readable as `.metrics`.
pub const CROSS_METRICS: &str = "orkestra.orkspace.io/cross-metrics";
/// The Katalog that manages a CR (written once).
pub const MANAGED_BY: &str = "orkestra.orkspace.io/managed-by";
/// When the runtime first managed a CR, RFC 3339 (written once).
pub const MANAGED_SINCE: &str = "orkestra.orkspace.io/managed-since";
/// The children a Wasm component returned last (JSON `[[apiVersion, kind, namespace, name]]`),
/// so the ones it stops returning can be deleted. Whoever writes the CR can write this, so
/// every entry is checked against the component's grants and the child's ownership before
/// anything is deleted.
pub const COMPONENT_CHILDREN: &str = "orkestra.orkspace.io/component-children";
/// A Katalog CR or CRD carrying `true` here cannot be deleted while the gateway's deletion
/// protection is on (upstream's label, so its tooling carries over).
pub const DELETION_PROTECTION: &str = "orkestra.io/deletion-protection";
/// With deletion protection's strict mode, the protection label may only be removed from
/// an object that also carries `true` here.
pub const STRICT_MODE_EXEMPT: &str = "orkestra.io/strict-mode-exempt";
