//! Components kept in OCI registries: pulled by manifest digest and verified link by link
//! (the manifest against the pinned digest, the component against the manifest's layer
//! digest), kept in a content-addressed store beside the compiled artifacts; and pushed in
//! the Wasm OCI artifact layout by `ork component push`.

mod artifact;
mod credentials;
mod store;

use std::time::Duration;

use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use orkestra_katalog::component::OciReference;
use sha2::{Digest, Sha256};

pub use artifact::component_interfaces;
pub use credentials::Registries;
pub use store::BlobStore;

/// Most a manifest may be; a Wasm artifact's is well under 1 KiB.
const MAX_MANIFEST_BYTES: usize = 1 << 20;
/// A whole pull or push, manifest and component.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);

impl Registries {
    /// The component `reference` pins: from `store` when kept there, else pulled from its
    /// registry, verified and kept. `cluster` reads the pull Secrets.
    pub async fn pull(
        &self,
        reference: &OciReference,
        store: &BlobStore,
        cluster: Option<&kube::Client>,
        max_bytes: u64,
    ) -> Result<Vec<u8>, String> {
        let mut session = None;
        let manifest = match store.get(&reference.digest) {
            Some(manifest) => manifest,
            None => {
                let Session { client, image, auth } = session.insert(self.session(reference, cluster).await?);
                let (manifest, _) = within(client.pull_manifest_raw(image, auth, &artifact::ACCEPTED_MEDIA_TYPES))
                    .await?
                    .map_err(|e| format!("cannot pull the manifest from {}: {e}", reference.registry))?;
                if manifest.len() > MAX_MANIFEST_BYTES {
                    return Err(format!(
                        "the manifest is {} bytes; the limit is {MAX_MANIFEST_BYTES}",
                        manifest.len()
                    ));
                }
                let digest = crate::cache::digest(&manifest);
                if digest != reference.digest {
                    return Err(format!(
                        "the registry's manifest has sha256 {digest}, not the pinned {}",
                        reference.digest
                    ));
                }
                keep(store, &digest, &manifest);
                manifest
            }
        };
        let layer = artifact::component_layer(&manifest, max_bytes)?;
        if let Some(component) = store.get(&layer.digest) {
            return Ok(component);
        }
        let Session { client, image, .. } = match session {
            Some(session) => session,
            None => self.session(reference, cluster).await?,
        };
        let component = within(download(&client, &image, &layer)).await??;
        keep(store, &layer.digest, &component);
        Ok(component)
    }

    /// Pushes `component` to `reference` (which names a tag) in the Wasm OCI artifact
    /// layout, returning the reference pinned to the manifest's digest.
    pub async fn push(
        &self,
        reference: &OciReference,
        component: &[u8],
        title: &str,
        created: &str,
    ) -> Result<OciReference, String> {
        let tag = reference
            .tag
            .as_deref()
            .ok_or_else(|| format!("{reference}: name a tag to push to (oci://HOST/REPO:TAG)"))?;
        let artifact = artifact::build(component, title, created)?;
        let image = Reference::with_tag(reference.registry.clone(), reference.repository.clone(), tag.into());
        let client = self.client();
        let auth = credentials::lookup(&reference.registry, &self.sources(None).await?)?;
        client.store_auth_if_needed(image.resolve_registry(), &auth).await;
        let failed = |what: &str, e: oci_client::errors::OciDistributionError| {
            format!("cannot push the {what} to {}: {e}", reference.registry)
        };
        within(client.push_blob(&image, component, &artifact.layer_digest))
            .await?
            .map_err(|e| failed("component", e))?;
        within(client.push_blob(&image, &artifact.config, &artifact.config_digest))
            .await?
            .map_err(|e| failed("config", e))?;
        let digest = crate::cache::digest(&artifact.manifest);
        let media_type = reqwest::header::HeaderValue::from_static(artifact::MANIFEST_MEDIA_TYPE);
        within(client.push_manifest_raw(&image, artifact.manifest, media_type))
            .await?
            .map_err(|e| failed("manifest", e))?;
        Ok(OciReference {
            digest,
            ..reference.clone()
        })
    }

    /// A client for `reference`'s registry, holding the credentials read for it now.
    async fn session(&self, reference: &OciReference, cluster: Option<&kube::Client>) -> Result<Session, String> {
        let auth = credentials::lookup(&reference.registry, &self.sources(cluster).await?)?;
        let image = Reference::with_digest(
            reference.registry.clone(),
            reference.repository.clone(),
            format!("sha256:{}", reference.digest),
        );
        let client = self.client();
        client.store_auth_if_needed(image.resolve_registry(), &auth).await;
        Ok(Session { client, image, auth })
    }

    fn client(&self) -> Client {
        Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.insecure.clone()),
            // A pinned digest names one artifact: never pick a platform from an index.
            platform_resolver: None,
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(30)),
            ..ClientConfig::default()
        })
    }

    /// Every credential source's text, read now; `cluster` is needed for the Secrets.
    async fn sources(&self, cluster: Option<&kube::Client>) -> Result<Vec<credentials::Found>, String> {
        let mut found = Vec::new();
        for path in &self.config_files {
            let text = tokio::fs::read(path)
                .await
                .map_err(|e| format!("registry config {}: {e}", path.display()))?;
            found.push(credentials::Found {
                origin: path.display().to_string(),
                text,
            });
        }
        for (namespace, name) in &self.secrets {
            let origin = format!("pull Secret {namespace}/{name}");
            let client = cluster.ok_or_else(|| format!("{origin}: no cluster to read it from"))?;
            let secrets =
                orkestra_kube::objects::namespaced::<k8s_openapi::api::core::v1::Secret>(client.clone(), namespace)
                    .map_err(|e| format!("{origin}: {e}"))?;
            let secret = secrets.get(name).await.map_err(|e| format!("{origin}: {e}"))?;
            let text = secret
                .data
                .and_then(|mut data| data.remove(".dockerconfigjson"))
                .ok_or_else(|| {
                    format!("{origin} has no .dockerconfigjson (make it with kubectl create secret docker-registry)")
                })?;
            found.push(credentials::Found { origin, text: text.0 });
        }
        Ok(found)
    }
}

/// One registry conversation: its client, the pinned image and the credentials sent.
struct Session {
    client: Client,
    image: Reference,
    auth: RegistryAuth,
}

/// Streams the layer, refusing more bytes than the manifest declares and any whose sha256
/// is not the layer digest.
async fn download(client: &Client, image: &Reference, layer: &artifact::Layer) -> Result<Vec<u8>, String> {
    let digest = format!("sha256:{}", layer.digest);
    let failed = |e: &dyn std::fmt::Display| format!("cannot pull the component from {}: {e}", image.registry());
    let mut stream = client
        .pull_blob_stream(image, digest.as_str())
        .await
        .map_err(|e| failed(&e))?;
    let mut bytes = Vec::with_capacity(layer.size as usize);
    let mut hasher = Sha256::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| failed(&e))?;
        if (bytes.len() + chunk.len()) as u64 > layer.size {
            return Err(format!(
                "the registry sent more than the {} bytes the manifest declares",
                layer.size
            ));
        }
        hasher.update(&chunk);
        bytes.extend_from_slice(&chunk);
    }
    let got = crate::cache::hex(&hasher.finalize());
    if got != layer.digest || bytes.len() as u64 != layer.size {
        return Err(format!(
            "the registry's component has sha256 {got} ({} bytes), not the manifest's {} ({} bytes)",
            bytes.len(),
            layer.digest,
            layer.size
        ));
    }
    Ok(bytes)
}

async fn within<T>(transfer: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(TRANSFER_TIMEOUT, transfer)
        .await
        .map_err(|_| format!("the registry did not answer within {}s", TRANSFER_TIMEOUT.as_secs()))
}

/// A store that cannot be written only costs a pull next time.
fn keep(store: &BlobStore, digest: &str, bytes: &[u8]) {
    if let Err(error) = store.put(digest, bytes) {
        tracing::warn!(%error, digest, "cannot keep a pulled blob");
    }
}
