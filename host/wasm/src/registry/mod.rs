//! Components kept in OCI registries: pulled by manifest digest and verified link by link
//! (the manifest against the pinned digest, the component against the manifest's layer
//! digest), kept in a content-addressed store beside the compiled artifacts; and pushed in
//! the Wasm OCI artifact layout by `ork component push`.

mod artifact;
mod credentials;
mod store;

use crate::error::Error;
use std::time::Duration;

use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use orkestra_katalog::component::OciReference;
use sha2::{Digest, Sha256};

pub use artifact::component_interfaces;
pub use credentials::Registries;
pub use store::BlobStore;

/// Most a manifest may be; a Wasm artifact's is well under 1 KiB. A longer answer is
/// dropped as it streams in, never buffered whole.
const MAX_MANIFEST_BYTES: usize = 1 << 20;
/// A whole push, or the credentials and manifest of a pull.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);
/// The manifest's request, from connecting to its last byte.
const MANIFEST_TIMEOUT: Duration = Duration::from_secs(20);
/// A component's download must move at least this many bytes in every [`STALL_WINDOW`]:
/// a registry that drips a byte every few seconds is given up on, not waited for.
const STALL_BYTES: usize = 32 << 10;
const STALL_WINDOW: Duration = Duration::from_secs(10);
/// What is reserved before a download from the size its manifest declares.
const MAX_PREALLOCATED: usize = 16 << 20;

/// Most a motif may be: a YAML file of templates.
const MAX_MOTIF_BYTES: u64 = 1 << 20;

impl Registries {
    /// The component `reference` pins: from `store` when kept there, else pulled from its
    /// registry, verified and kept. `cluster` reads the pull Secrets.
    pub async fn pull(
        &self,
        reference: &OciReference,
        store: &BlobStore,
        cluster: Option<&kube::Client>,
        max_bytes: u64,
    ) -> Result<Vec<u8>, Error> {
        self.pull_layer(reference, store, cluster, &artifact::COMPONENT, max_bytes)
            .await
    }

    /// The motif `reference` pins, as [`Registries::pull`] gets a component: its YAML.
    pub async fn pull_motif(
        &self,
        reference: &OciReference,
        store: &BlobStore,
        cluster: Option<&kube::Client>,
    ) -> Result<String, Error> {
        let bytes = self
            .pull_layer(reference, store, cluster, &artifact::MOTIF, MAX_MOTIF_BYTES)
            .await?;
        motif_text(reference, bytes)
    }

    /// The one layer of `kind` of the artifact `reference` pins, from `store` or pulled.
    async fn pull_layer(
        &self,
        reference: &OciReference,
        store: &BlobStore,
        cluster: Option<&kube::Client>,
        kind: &artifact::LayerKind,
        max_bytes: u64,
    ) -> Result<Vec<u8>, Error> {
        let mut session = None;
        let manifest = match store.get(&reference.digest) {
            Some(manifest) => manifest,
            None => {
                let opened = session.insert(within(self.session(reference, cluster)).await??);
                let manifest = self.manifest(opened).await?;
                let digest = crate::cache::digest(&manifest);
                if digest != reference.digest {
                    return Err(Error::Registry(format!(
                        "the registry's manifest has sha256 {digest}, not the pinned {}",
                        reference.digest
                    )));
                }
                keep(store, &digest, &manifest);
                manifest
            }
        };
        let layer = artifact::layer_of(&manifest, kind, max_bytes)?;
        if let Some(bytes) = store.get(&layer.digest) {
            return Ok(bytes);
        }
        let Session { client, image, .. } = match session {
            Some(session) => session,
            None => within(self.session(reference, cluster)).await??,
        };
        let bytes = download(&client, &image, &layer, kind).await?;
        keep(store, &layer.digest, &bytes);
        Ok(bytes)
    }

    /// Pushes `component` to `reference` (which names a tag) in the Wasm OCI artifact
    /// layout, returning the reference pinned to the manifest's digest.
    pub async fn push(
        &self,
        reference: &OciReference,
        component: &[u8],
        title: &str,
        created: &str,
    ) -> Result<OciReference, Error> {
        let artifact = artifact::build(component, title, created)?;
        self.push_artifact(reference, artifact, component, "component").await
    }

    /// Pushes a motif's YAML to `reference` (which names a tag), returning the reference
    /// pinned to the manifest's digest.
    pub async fn push_motif(
        &self,
        reference: &OciReference,
        motif: &[u8],
        title: &str,
        created: &str,
    ) -> Result<OciReference, Error> {
        if motif.len() as u64 > MAX_MOTIF_BYTES {
            return Err(Error::Registry(format!(
                "the motif is {} bytes; the limit is {MAX_MOTIF_BYTES}",
                motif.len()
            )));
        }
        let artifact = artifact::build_motif(motif, title, created)?;
        self.push_artifact(reference, artifact, motif, "motif").await
    }

    /// Pushes the layer, the config and the manifest of `artifact` (`what` names it in errors).
    async fn push_artifact(
        &self,
        reference: &OciReference,
        artifact: artifact::Artifact,
        layer: &[u8],
        what: &str,
    ) -> Result<OciReference, Error> {
        let tag = reference
            .tag
            .as_deref()
            .ok_or_else(|| Error::Registry(format!("{reference}: name a tag to push to (oci://HOST/REPO:TAG)")))?;
        let image = Reference::with_tag(reference.registry.clone(), reference.repository.clone(), tag.into());
        let client = self.client();
        let auth = credentials::lookup(&reference.registry, &self.sources(None).await?)?;
        client.store_auth_if_needed(image.resolve_registry(), &auth).await;
        let failed = |what: &str, e: oci_client::errors::OciDistributionError| {
            Error::Registry(format!("cannot push the {what} to {}: {e}", reference.registry))
        };
        within(client.push_blob(&image, layer, &artifact.layer_digest))
            .await?
            .map_err(|e| failed(what, e))?;
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
    async fn session(&self, reference: &OciReference, cluster: Option<&kube::Client>) -> Result<Session, Error> {
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

    /// The pinned manifest, fetched here rather than by oci-client (which buffers a whole
    /// answer): with the session's credentials, read within [`MAX_MANIFEST_BYTES`] as it
    /// streams in, within [`MANIFEST_TIMEOUT`].
    async fn manifest(&self, session: &Session) -> Result<Vec<u8>, Error> {
        let Session { client, image, auth } = session;
        let registry = image.resolve_registry();
        let failed = |why: String| Error::Registry(format!("cannot pull the manifest from {registry}: {why}"));
        let token = within(client.auth(image, auth, RegistryOperation::Pull))
            .await?
            .map_err(|e| failed(e.to_string()))?;
        let scheme = match self.insecure.iter().any(|r| r == registry) {
            true => "http",
            false => "https",
        };
        let url = format!(
            "{scheme}://{registry}/v2/{}/manifests/{}",
            image.repository(),
            image.digest().unwrap_or_default()
        );
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(MANIFEST_TIMEOUT)
            .build()
            .map_err(|e| failed(e.to_string()))?;
        let mut request = http
            .get(&url)
            .header(reqwest::header::ACCEPT, artifact::ACCEPTED_MEDIA_TYPES.join(", "));
        request = match (token, auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
            (None, _) => request,
        };
        let response = request.send().await.map_err(|e| failed(e.to_string()))?;
        let status = response.status();
        let bytes = orkestra_net::read::bounded(response, MAX_MANIFEST_BYTES)
            .await
            .map_err(|e| failed(e.to_string()))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).into_owned();
            return Err(failed(format!("{status}: {text}")));
        }
        Ok(bytes)
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
    async fn sources(&self, cluster: Option<&kube::Client>) -> Result<Vec<credentials::Found>, Error> {
        let mut found = Vec::new();
        for path in &self.config_files {
            let text = tokio::fs::read(path)
                .await
                .map_err(|e| Error::Registry(format!("registry config {}: {e}", path.display())))?;
            found.push(credentials::Found {
                origin: path.display().to_string(),
                text,
            });
        }
        for (namespace, name) in &self.secrets {
            let origin = format!("pull Secret {namespace}/{name}");
            let client = cluster.ok_or_else(|| Error::Registry(format!("{origin}: no cluster to read it from")))?;
            let secrets =
                orkestra_kube::objects::namespaced::<k8s_openapi::api::core::v1::Secret>(client.clone(), namespace)
                    .map_err(|e| Error::Registry(format!("{origin}: {e}")))?;
            let secret = secrets
                .get(name)
                .await
                .map_err(|e| Error::Registry(format!("{origin}: {e}")))?;
            let text = secret
                .data
                .and_then(|mut data| data.remove(".dockerconfigjson"))
                .ok_or_else(|| {
                    Error::Registry(format!(
                        "{origin} has no .dockerconfigjson (make it with kubectl create secret docker-registry)"
                    ))
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
/// is not the layer digest, and giving up on a registry that stalls (less than
/// [`STALL_BYTES`] in a [`STALL_WINDOW`]).
async fn download(
    client: &Client,
    image: &Reference,
    layer: &artifact::Layer,
    kind: &artifact::LayerKind,
) -> Result<Vec<u8>, Error> {
    let digest = format!("sha256:{}", layer.digest);
    let what = kind.what();
    let failed =
        |e: &dyn std::fmt::Display| Error::Registry(format!("cannot pull the {what} from {}: {e}", image.registry()));
    let stalled = || {
        Error::Registry(format!(
            "the registry {} sent less than {} KiB in {}s: given up",
            image.registry(),
            STALL_BYTES >> 10,
            STALL_WINDOW.as_secs()
        ))
    };
    let mut stream = tokio::time::timeout(STALL_WINDOW, client.pull_blob_stream(image, digest.as_str()))
        .await
        .map_err(|_| stalled())?
        .map_err(|e| failed(&e))?;
    let mut bytes = Vec::with_capacity((layer.size as usize).min(MAX_PREALLOCATED));
    let mut hasher = Sha256::new();
    // Bytes received since the window began.
    let (mut window, mut moved) = (tokio::time::Instant::now() + STALL_WINDOW, 0usize);
    loop {
        if let Ok(next) = tokio::time::timeout_at(window, stream.next()).await {
            let Some(chunk) = next else { break };
            let chunk = chunk.map_err(|e| failed(&e))?;
            moved += chunk.len();
            if (bytes.len() + chunk.len()) as u64 > layer.size {
                return Err(Error::Registry(format!(
                    "the registry sent more than the {} bytes the manifest declares",
                    layer.size
                )));
            }
            hasher.update(&chunk);
            bytes.extend_from_slice(&chunk);
        }
        if tokio::time::Instant::now() >= window {
            if moved < STALL_BYTES {
                return Err(stalled());
            }
            (window, moved) = (tokio::time::Instant::now() + STALL_WINDOW, 0);
        }
    }
    let got = crate::cache::hex(&hasher.finalize());
    if got != layer.digest || bytes.len() as u64 != layer.size {
        return Err(Error::Registry(format!(
            "the registry's {what} has sha256 {got} ({} bytes), not the manifest's {} ({} bytes)",
            bytes.len(),
            layer.digest,
            layer.size
        )));
    }
    Ok(bytes)
}

async fn within<T>(transfer: impl Future<Output = T>) -> Result<T, Error> {
    tokio::time::timeout(TRANSFER_TIMEOUT, transfer).await.map_err(|_| {
        Error::Registry(format!(
            "the registry did not answer within {}s",
            TRANSFER_TIMEOUT.as_secs()
        ))
    })
}

/// The motif `reference` pins, when `store` keeps it whole (its manifest and its layer):
/// what a command that must not reach out (validate, plan, simulate) reads.
pub fn cached_motif(reference: &OciReference, store: &BlobStore) -> Option<Result<String, Error>> {
    let manifest = store.get(&reference.digest)?;
    let layer = match artifact::layer_of(&manifest, &artifact::MOTIF, MAX_MOTIF_BYTES) {
        Ok(layer) => layer,
        Err(error) => return Some(Err(error)),
    };
    Some(motif_text(reference, store.get(&layer.digest)?))
}

/// A motif layer's bytes as the YAML text they must be.
fn motif_text(reference: &OciReference, bytes: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(bytes).map_err(|_| Error::Motif(format!("the motif {reference} is not UTF-8 text")))
}

/// A store that cannot be written only costs a pull next time.
fn keep(store: &BlobStore, digest: &str, bytes: &[u8]) {
    if let Err(error) = store.put(digest, bytes) {
        tracing::warn!(%error, digest, "cannot keep a pulled blob");
    }
}
