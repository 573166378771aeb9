//! Which CRD a cross read names. Upstream lets a read pick its CRD by the CRD's
//! `labelSelector` instead of its key (`cross: [{labelSelector: {tier: db}, as: db}]`): the
//! CRD of the Katalog whose `labelSelector` holds every pair given; or by its kind
//! (`cross: [{kind: Database}]`), the one CRD of that kind. Resolved once at load,
//! so the compile pass and the runtime only ever see a key.

use std::collections::BTreeMap;

use crate::loaded::Katalog;

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

/// The CRDs whose `apiTypes.kind` is `kind`, by key.
pub(crate) fn of_kind<'k>(katalog: &'k Katalog, kind: &str) -> Vec<&'k str> {
    katalog
        .crds
        .iter()
        .filter(|(_, crd)| crd.entry.api_types.kind == kind)
        .map(|(name, _)| name.as_str())
        .collect()
}

/// Names the CRD of every read that picks it by labelSelector or kind and has exactly one
/// match; the others are left for validation to report.
pub(crate) fn resolve(katalog: &mut Katalog) {
    let selectors: Vec<(String, Labels, String)> = katalog
        .crds
        .iter()
        .map(|(name, crd)| {
            let entry = &crd.entry;
            (name.clone(), entry.label_selector.clone(), entry.api_types.kind.clone())
        })
        .collect();
    for crd in katalog.crds.values_mut() {
        for (_, ob) in crd.entry.boxes_mut() {
            for read in ob.observe.iter_mut().flat_map(|o| o.cross.iter_mut()) {
                if read.crd.is_some() {
                    continue;
                }
                let found: Vec<&str> = match (&read.kind, read.label_selector.is_empty()) {
                    (Some(kind), true) => selectors
                        .iter()
                        .filter(|(_, _, k)| k == kind)
                        .map(|(name, _, _)| name.as_str())
                        .collect(),
                    (None, false) => {
                        let crds = selectors.iter().map(|(name, labels, _)| (name.as_str(), labels));
                        select(crds, &read.label_selector)
                    }
                    _ => continue,
                };
                if let [one] = found[..] {
                    read.crd = Some(one.to_string());
                }
            }
        }
    }
}
