//! The CR's own metadata write: bookkeeping (finalizers, labels, managed-by), the fields
//! mutation rules set, and the stamps riding along, as one merge patch or none.

use super::*;

impl Declarative {
    /// One write for everything the CR itself needs: our finalizers where its deletion waits
    /// for us, CRD labels, the fields mutation rules set (persisted, so users and other
    /// controllers see them), and, riding along, the managed label, the managed-by/-since
    /// annotations and the runtime's stamps. Nothing when all is in place. Says whether it wrote, and whether it put finalizers in
    /// place. The patch carries the resourceVersion, so a finalizer list changed by someone
    /// else in between is a conflict and a retry, never a lost entry.
    pub(super) async fn write_metadata(
        &self,
        request: &Request,
        object: &Value,
        mutation: Option<Value>,
        now: jiff::Timestamp,
    ) -> Result<Bookkept, ReconcileError> {
        let resolver = Resolver::in_context(object, &self.crd.notes, &request.context);
        // A component may have on-delete work whatever the box says.
        let holds = self.component.is_some() || self.crd.holds_deletion(&request.compiled);
        let bookkeeping = lifecycle::bookkeeping_patch(&self.crd, holds, object, &resolver, now)
            .map_err(|e| ReconcileError::new(Reason::RenderFailed, e))?;
        let added = bookkeeping
            .as_ref()
            .is_some_and(|p| p["metadata"]["finalizers"].is_array() && !self.crd.remove_finalizers);
        let mut patch = match (mutation, bookkeeping) {
            (None, None) => return Ok(Bookkept::default()),
            (Some(mut patch), Some(bookkeeping)) => {
                merge(&mut patch, bookkeeping);
                patch
            }
            (Some(patch), None) | (None, Some(patch)) => patch,
        };
        let offered = request.stamps.offer(object);
        if let Some((_, Some(annotations))) = &offered {
            for (annotation, stamp) in annotations {
                patch["metadata"]["annotations"][annotation] = stamp.clone();
            }
        }
        patch["metadata"]["resourceVersion"] = object["metadata"]["resourceVersion"].clone();
        self.patch_object(request, patch).await?;
        if let Some((stamps, _)) = offered {
            request.stamps.carried_by_write(stamps);
        }
        Ok(Bookkept {
            wrote: true,
            finalizers_added: added,
        })
    }

    pub(super) async fn patch_object(&self, request: &Request, patch: Value) -> Result<(), ReconcileError> {
        self.counters.wrote();
        let patched = match self.api(request) {
            Ok(api) => {
                let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
                let patched = api.patch(split_key(&request.key).1, &params, &patch);
                request.write_cr(patched).await
            }
            Err(refused) => Err(refused),
        };
        patched.map_err(|e| {
            ReconcileError::stale(
                Reason::MetadataPatchFailed,
                format!("{} {}", self.crd.kind, request.key),
                e,
            )
        })?;
        Ok(())
    }
}
