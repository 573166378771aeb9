//! What a run gathers into its context before the children: the children earlier runs made
//! (for the conditions that read them), and the admission rules' and blocks' external calls.

use super::*;

impl Declarative {
    /// `.children` as earlier runs left them: for each owned kind the Katalog reads, the
    /// CR's newest child of it that the watches hold.
    pub(super) fn observed_children(&self, object: &Value) -> Map<String, Value> {
        let mut observed = Map::new();
        for (api_version, kind) in &self.crd.observed_children {
            if let Some(child) = self.applier.newest_owned(api_version, kind, object) {
                observed.insert(kind.to_lowercase(), (*child).clone());
            }
        }
        observed
    }

    /// The admission rules' external calls, into `context["external"]`: the rules read their
    /// results. One that fails (without `continueOnError`) fails the reconcile, as a block's
    /// does, once the rules are reported.
    pub(super) async fn call_rule_externals(
        &self,
        object: &Value,
        context: &mut Map<String, Value>,
    ) -> Result<(), ReconcileError> {
        if self.crd.rule_calls.is_empty() {
            return Ok(());
        }
        let mut resolver = Resolver::in_context(object, &self.crd.notes, context);
        let outcome = orkestra_effects::external::run(&self.externals, &self.crd.rule_calls, &mut resolver).await;
        if let Some(results) = resolver.lookup("external") {
            context.insert("external".into(), results.clone());
        }
        outcome.map_err(|e| ReconcileError::new(Reason::ExternalCallFailed, e.to_string()))
    }

    /// The external calls of the blocks whose gate passes, into `context["external"]`.
    #[tracing::instrument(level = "debug", name = "externals", skip_all)]
    pub(super) async fn call_externals(
        &self,
        compiled: &CompiledBox,
        object: &Value,
        context: &mut Map<String, Value>,
    ) -> Result<(), ReconcileError> {
        let blocks = [&compiled.on_create, &compiled.on_reconcile];
        if blocks.iter().flat_map(|b| b.iter()).all(|b| b.external.is_empty()) {
            return Ok(());
        }
        let mut resolver = Resolver::in_context(object, &self.crd.notes, context);
        for block in blocks.into_iter().flatten().filter(|b| !b.external.is_empty()) {
            if block.conditions.passes(&resolver, None) {
                let outcome = orkestra_effects::external::run(&self.externals, &block.external, &mut resolver).await;
                outcome.map_err(|e| ReconcileError::new(Reason::ExternalCallFailed, e.to_string()))?;
            }
        }
        if let Some(results) = resolver.lookup("external") {
            context.insert("external".into(), results.clone());
        }
        Ok(())
    }
}
