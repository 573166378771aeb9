//! The Wasm OCI artifact layout (the CNCF TAG Runtime's, which wkg, wasmCloud and Spin use):
//! an OCI image manifest whose config is `application/vnd.wasm.config.v0+json` and whose one
//! layer, `application/wasm`, is the component's bytes. Motifs travel the same way: an
//! image manifest whose one layer is the motif's YAML.

use crate::error::Error;
use orkestra_katalog::component::is_sha256_hex;
use serde::Deserialize;

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The layer type of the older wasm-to-oci layout, still found in registries.
const LEGACY_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";
const INDEX_MEDIA_TYPES: [&str; 2] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
/// A motif artifact's config and layer, as `ork motif push` writes them.
pub const MOTIF_CONFIG_MEDIA_TYPE: &str = "application/vnd.orkestra.motif.config.v1+json";
pub const MOTIF_LAYER_MEDIA_TYPE: &str = "application/vnd.orkestra.motif.v1+yaml";
/// The layer types a motif is read from: ours, plain YAML, and what `oras push` gives a
/// file by default.
const MOTIF_LAYER_MEDIA_TYPES: [&str; 5] = [
    MOTIF_LAYER_MEDIA_TYPE,
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "application/vnd.oci.image.layer.v1.tar",
];
/// What a pull accepts: an index is asked for too, so that pinning one gets a clear error.
pub const ACCEPTED_MEDIA_TYPES: [&str; 3] = [MANIFEST_MEDIA_TYPE, INDEX_MEDIA_TYPES[0], INDEX_MEDIA_TYPES[1]];

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
    #[serde(default)]
    manifests: Option<Vec<serde_json::Value>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
}

/// The chosen layer of a manifest: its lowercase hex sha256 and declared size.
#[derive(Debug)]
pub struct Layer {
    pub digest: String,
    pub size: u64,
}

/// What one kind of artifact keeps in its layer, for picking and naming it.
pub struct LayerKind {
    /// Its layer's media types.
    types: &'static [&'static str],
    /// How errors name it.
    name: &'static str,
    /// What its artifact is, when there is more than one such layer.
    one: &'static str,
}

impl LayerKind {
    /// What its artifact holds, for errors: `component`, `motif`.
    pub fn what(&self) -> &'static str {
        self.one.trim_start_matches("a ")
    }
}

pub const COMPONENT: LayerKind = LayerKind {
    types: &[LAYER_MEDIA_TYPE, LEGACY_LAYER_MEDIA_TYPE],
    name: "Wasm",
    one: "a component",
};

pub const MOTIF: LayerKind = LayerKind {
    types: &MOTIF_LAYER_MEDIA_TYPES,
    name: "motif",
    one: "a motif",
};

/// The one layer of `kind` in `manifest`, checked to be at most `max_size` bytes.
pub fn layer_of(manifest: &[u8], kind: &LayerKind, max_size: u64) -> Result<Layer, Error> {
    let manifest: Manifest = serde_json::from_slice(manifest)
        .map_err(|e| Error::Registry(format!("the manifest is not an OCI image manifest: {e}")))?;
    let media_type = manifest.media_type.as_deref().unwrap_or(MANIFEST_MEDIA_TYPE);
    if INDEX_MEDIA_TYPES.contains(&media_type) || manifest.manifests.is_some() {
        return Err(Error::Registry(format!(
            "the digest names an image index; pin the digest of the {} artifact's own manifest",
            kind.name
        )));
    }
    if media_type != MANIFEST_MEDIA_TYPE {
        return Err(Error::Registry(format!(
            "the manifest's media type is {media_type}, not {MANIFEST_MEDIA_TYPE}"
        )));
    }
    let found: Vec<&Descriptor> = manifest
        .layers
        .iter()
        .filter(|l| kind.types.contains(&l.media_type.as_str()))
        .collect();
    let layer = match found[..] {
        [layer] => layer,
        [] => {
            let config = manifest
                .config
                .as_ref()
                .map(|c| c.media_type.as_str())
                .unwrap_or("none");
            let layers: Vec<&str> = manifest.layers.iter().map(|l| l.media_type.as_str()).collect();
            return Err(Error::Registry(format!(
                "the artifact has no {} layer (config {config}, layers {layers:?}); is it a container image?",
                kind.types[0]
            )));
        }
        _ => {
            return Err(Error::Registry(format!(
                "the artifact has {} {} layers; {} is one",
                found.len(),
                kind.name,
                kind.one
            )));
        }
    };
    let digest = sha256_hex(&layer.digest).ok_or_else(|| {
        Error::Registry(format!(
            "the {} layer's digest {:?} is not sha256:HEX",
            kind.name, layer.digest
        ))
    })?;
    if layer.size > max_size {
        return Err(Error::Registry(format!(
            "the {} layer is {} bytes; the limit is {max_size}",
            kind.name, layer.size
        )));
    }
    Ok(Layer {
        digest,
        size: layer.size,
    })
}

/// The hex of a `sha256:HEX` digest, when it is one.
fn sha256_hex(digest: &str) -> Option<String> {
    let hex = digest.strip_prefix("sha256:")?;
    is_sha256_hex(hex).then(|| hex.into())
}

/// What `ork component push` uploads: config and manifest bytes for a component.
#[derive(Debug)]
pub struct Artifact {
    pub config: Vec<u8>,
    pub manifest: Vec<u8>,
    /// `sha256:HEX` of the config and of the component, as the manifest names them.
    pub config_digest: String,
    pub layer_digest: String,
}

/// The top-level imports and exports of a component (`wasi:cli/environment@0.2.6`, ...),
/// for the config; an error when `bytes` is not a component.
pub fn component_interfaces(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), Error> {
    use wasmparser::{Encoding, Parser, Payload};
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    // Nested modules and components bring their own imports; only depth 0 is the component's.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| Error::Registry(format!("not a Wasm binary: {e}")))? {
            Payload::Version { encoding, .. } if depth == 0 && encoding != Encoding::Component => {
                return Err(Error::Registry(
                    "it is a core Wasm module, not a component (wrap it with wasm-tools component new)".into(),
                ));
            }
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    imports.push(
                        import
                            .map_err(|e| Error::Registry(e.to_string()))?
                            .name
                            .name
                            .to_string(),
                    );
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    exports.push(
                        export
                            .map_err(|e| Error::Registry(e.to_string()))?
                            .name
                            .name
                            .to_string(),
                    );
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

/// The config and manifest for `component`, created at `created` (RFC 3339).
pub fn build(component: &[u8], title: &str, created: &str) -> Result<Artifact, Error> {
    let (imports, exports) = component_interfaces(component)?;
    let layer_digest = format!("sha256:{}", crate::cache::digest(component));
    let config = serde_json::json!({
        "created": created,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
        "component": {"imports": imports, "exports": exports},
    });
    let types = (CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE);
    manifest_of(config, types, (component, &layer_digest), title, created)
}

/// The config and manifest for a motif's YAML, created at `created` (RFC 3339).
pub fn build_motif(motif: &[u8], title: &str, created: &str) -> Result<Artifact, Error> {
    let layer_digest = format!("sha256:{}", crate::cache::digest(motif));
    let config = serde_json::json!({"created": created, "layerDigests": [layer_digest]});
    let types = (MOTIF_CONFIG_MEDIA_TYPE, MOTIF_LAYER_MEDIA_TYPE);
    manifest_of(config, types, (motif, &layer_digest), title, created)
}

/// An image manifest of `config` and one layer, with the media types `(config, layer)`.
fn manifest_of(
    config: serde_json::Value,
    (config_type, layer_type): (&str, &str),
    (layer, layer_digest): (&[u8], &str),
    title: &str,
    created: &str,
) -> Result<Artifact, Error> {
    let config = serde_json::to_vec(&config).map_err(|e| Error::Registry(e.to_string()))?;
    let config_digest = format!("sha256:{}", crate::cache::digest(&config));
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {
            "mediaType": config_type,
            "digest": config_digest,
            "size": config.len(),
        },
        "layers": [{
            "mediaType": layer_type,
            "digest": layer_digest,
            "size": layer.len(),
            "annotations": {"org.opencontainers.image.title": title},
        }],
        "annotations": {"org.opencontainers.image.created": created},
    }))
    .map_err(|e| Error::Registry(e.to_string()))?;
    Ok(Artifact {
        config,
        manifest,
        config_digest,
        layer_digest: layer_digest.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: the preamble alone.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";

    #[test]
    fn a_built_manifest_names_its_one_layer_and_reads_back() {
        let artifact = build(EMPTY_COMPONENT, "hook.wasm", "2026-12-02T00:00:00Z").unwrap();
        let layer = layer_of(&artifact.manifest, &COMPONENT, 1 << 20).unwrap();
        assert_eq!(layer.digest, crate::cache::digest(EMPTY_COMPONENT));
        assert_eq!(layer.size, EMPTY_COMPONENT.len() as u64);
        let config: serde_json::Value = serde_json::from_slice(&artifact.config).unwrap();
        assert_eq!(config["layerDigests"][0], format!("sha256:{}", layer.digest));
        assert_eq!(config["os"], "wasip2");
        let manifest: serde_json::Value = serde_json::from_slice(&artifact.manifest).unwrap();
        assert_eq!(manifest["config"]["mediaType"], CONFIG_MEDIA_TYPE);
        assert_eq!(manifest["config"]["size"], artifact.config.len());
    }

    #[test]
    fn a_motif_artifact_reads_back_and_a_component_is_not_taken_for_one() {
        let motif = b"apiVersion: orkestra.orkspace.io/v1\nkind: Motif\n";
        let artifact = build_motif(motif, "jobs.yaml", "2026-12-06T00:00:00Z").unwrap();
        let layer = layer_of(&artifact.manifest, &MOTIF, 1 << 20).unwrap();
        assert_eq!(layer.digest, crate::cache::digest(motif));
        let manifest: serde_json::Value = serde_json::from_slice(&artifact.manifest).unwrap();
        assert_eq!(manifest["config"]["mediaType"], MOTIF_CONFIG_MEDIA_TYPE);
        let refused = layer_of(&artifact.manifest, &COMPONENT, 1 << 20).unwrap_err();
        assert!(
            refused.to_string().contains("has no application/wasm layer"),
            "{refused}"
        );
        let component = build(EMPTY_COMPONENT, "hook.wasm", "now").unwrap();
        let refused = layer_of(&component.manifest, &MOTIF, 1 << 20).unwrap_err();
        assert!(refused.to_string().contains(MOTIF_LAYER_MEDIA_TYPE), "{refused}");
        let small = layer_of(&artifact.manifest, &MOTIF, 8).unwrap_err();
        assert!(small.to_string().contains("the motif layer is"), "{small}");
    }

    #[test]
    fn a_core_module_or_garbage_is_not_pushed() {
        let core = b"\0asm\x01\x00\x00\x00";
        assert!(
            build(core, "m.wasm", "now")
                .unwrap_err()
                .to_string()
                .contains("core Wasm module")
        );
        assert!(
            build(b"hello", "m.wasm", "now")
                .unwrap_err()
                .to_string()
                .contains("not a Wasm binary")
        );
    }

    #[test]
    fn manifests_that_are_not_one_wasm_layer_are_refused_by_name() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let layer = |media: &str, size: u64| serde_json::json!({"mediaType": media, "digest": digest, "size": size});
        let manifest = |layers: Vec<serde_json::Value>| {
            serde_json::to_vec(&serde_json::json!({
                "schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest, "size": 2},
                "layers": layers,
            }))
            .unwrap()
        };
        let cases = [
            (
                manifest(vec![layer("application/vnd.oci.image.layer.v1.tar+gzip", 10)]),
                "container image",
            ),
            (
                manifest(vec![layer(LAYER_MEDIA_TYPE, 10), layer(LAYER_MEDIA_TYPE, 10)]),
                "2 Wasm layers",
            ),
            (manifest(vec![layer(LAYER_MEDIA_TYPE, 2 << 20)]), "the limit is 1048576"),
            (
                serde_json::to_vec(&serde_json::json!({"mediaType": INDEX_MEDIA_TYPES[0], "manifests": []})).unwrap(),
                "image index",
            ),
            (b"<html>".to_vec(), "not an OCI image manifest"),
        ];
        for (bytes, says) in cases {
            let error = layer_of(&bytes, &COMPONENT, 1 << 20).err().unwrap();
            assert!(error.to_string().contains(says), "{says}: {error}");
        }
        let legacy = manifest(vec![layer(LEGACY_LAYER_MEDIA_TYPE, 10)]);
        assert_eq!(layer_of(&legacy, &COMPONENT, 1 << 20).unwrap().digest, "a".repeat(64));
    }
}
