//! Cross reads name a CRD that exists: by key (`crd`), which must be one of this Katalog's
//! unless the read goes to another runtime (`source`), or by `labelSelector`, which must
//! pick exactly one CRD and then needs `as` (there is no key to default it to).

use super::target::{matching, of_kind};
use crate::check::{Checker, box_nodes, item};
use crate::loaded::Katalog;
use crate::model::CrdEntry;
use crate::yaml::Node;

impl Checker<'_> {
    pub(crate) fn cross_reads(&mut self, entry: &CrdEntry, node: &Node, base: &str, katalog: &Katalog) {
        for (ob, box_node, box_path) in box_nodes(entry, node, base) {
            let list = box_node.get("observe").and_then(|o| o.get("cross"));
            for (i, read) in ob.observe.iter().flat_map(|o| o.cross.iter()).enumerate() {
                let path = format!("{box_path}.observe.cross[{i}]");
                let read_node = item(list, i).unwrap_or(box_node);
                let at = |key: &str| read_node.get(key).map_or(read_node.pos, |n| n.pos);
                match (&read.crd, read.label_selector.is_empty()) {
                    (Some(_), false) => self.error(
                        &path,
                        read_node.pos,
                        "name the CRD by `crd` or by `labelSelector`, not both",
                    ),
                    (None, true) => match &read.kind {
                        None => self.error(
                            &path,
                            read_node.pos,
                            "needs `crd` (a CRD's key), `kind` (one CRD's kind) or `labelSelector` (matching one CRD's labelSelector)",
                        ),
                        Some(kind) => match of_kind(katalog, kind)[..] {
                            [_] => {}
                            [] => self.error(
                                format!("{path}.kind"),
                                at("kind"),
                                format!("no CRD of the Katalog has kind {kind}; a CRD of another runtime is read by `crd` with `source`"),
                            ),
                            ref several => self.error(
                                format!("{path}.kind"),
                                at("kind"),
                                format!("several CRDs have kind {kind} ({}): name one with `crd`", several.join(", ")),
                            ),
                        },
                    },
                    (None, false) => {
                        if read.as_.is_none() {
                            self.error(
                                format!("{path}.as"),
                                read_node.pos,
                                "is required when the CRD is picked by labelSelector",
                            );
                        }
                        let pairs: Vec<String> = read.label_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        match matching(katalog, &read.label_selector)[..] {
                            [_] => {}
                            [] => self.error(
                                format!("{path}.labelSelector"),
                                at("labelSelector"),
                                format!("no CRD of the Katalog has a labelSelector with {}", pairs.join(",")),
                            ),
                            ref several => self.error(
                                format!("{path}.labelSelector"),
                                at("labelSelector"),
                                format!(
                                    "{} matches several CRDs ({}): name one with `crd`",
                                    pairs.join(","),
                                    several.join(", ")
                                ),
                            ),
                        }
                    }
                    (Some(crd), true) => {
                        if read.source.is_none()
                            && let Some(unknown) = katalog.unknown_crd(crd)
                        {
                            self.error(
                                format!("{path}.crd"),
                                at("crd"),
                                format!("{unknown}; a CRD of another runtime is read with `source`"),
                            );
                        }
                    }
                }
            }
        }
    }
}
