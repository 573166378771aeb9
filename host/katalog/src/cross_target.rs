//! Which CRD a cross read names. Upstream lets a read pick its CRD by the CRD's
//! `labelSelector` instead of its key (`cross: [{labelSelector: {tier: db}, as: db}]`): the
//! CRD of the Katalog whose `labelSelector` holds every pair given. Resolved once at load,
//! so the compile pass and the runtime only ever see a key.

use std::collections::BTreeMap;

use crate::loaded::Katalog;
use crate::model::{CrdEntry, OperatorBox, ServeTarget};

type Labels = BTreeMap<String, String>;

/// The CRDs whose `labelSelector` holds every pair of `selector`, by key.
pub(crate) fn matching<'k>(katalog: &'k Katalog, selector: &Labels) -> Vec<&'k str> {
    let crds = katalog
        .crds
        .iter()
        .map(|(name, crd)| (name.as_str(), &crd.entry.label_selector));
    select(crds, selector)
}

fn select<'k>(crds: impl Iterator<Item = (&'k str, &'k Labels)>, selector: &Labels) -> Vec<&'k str> {
    crds.filter(|(_, labels)| selector.iter().all(|(k, v)| labels.get(k) == Some(v)))
        .map(|(name, _)| name)
        .collect()
}

/// Names the CRD of every read that picks it by labelSelector and has exactly one match;
/// the others are left for validation to report.
pub(crate) fn resolve(katalog: &mut Katalog) {
    let selectors: Vec<(String, Labels)> = katalog
        .crds
        .iter()
        .map(|(name, crd)| (name.clone(), crd.entry.label_selector.clone()))
        .collect();
    for crd in katalog.crds.values_mut() {
        for ob in boxes_mut(&mut crd.entry) {
            for read in ob.observe.iter_mut().flat_map(|o| o.cross.iter_mut()) {
                if read.crd.is_some() || read.label_selector.is_empty() {
                    continue;
                }
                let crds = selectors.iter().map(|(name, labels)| (name.as_str(), labels));
                if let [one] = select(crds, &read.label_selector)[..] {
                    read.crd = Some(one.to_string());
                }
            }
        }
    }
}

/// A CRD's own box and its serve targets' boxes.
pub(crate) fn boxes(entry: &CrdEntry) -> Vec<(Option<&str>, &OperatorBox)> {
    let targets = match entry.serve.as_ref().and_then(|s| s.target.as_ref()) {
        Some(ServeTarget::Entries(targets)) => targets
            .iter()
            .filter_map(|(name, t)| t.operator_box.as_ref().map(|ob| (Some(name.as_str()), ob)))
            .collect(),
        _ => Vec::new(),
    };
    std::iter::once((None, &entry.operator_box)).chain(targets).collect()
}

fn boxes_mut(entry: &mut CrdEntry) -> Vec<&mut OperatorBox> {
    let targets = match entry.serve.as_mut().and_then(|s| s.target.as_mut()) {
        Some(ServeTarget::Entries(targets)) => targets.values_mut().filter_map(|t| t.operator_box.as_mut()).collect(),
        _ => Vec::new(),
    };
    std::iter::once(&mut entry.operator_box).chain(targets).collect()
}
