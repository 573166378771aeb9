//! `files`: directories granted read-only. wasmtime-wasi holds each as a cap-std directory,
//! so neither `..` nor a symlink leads out of it; a granted directory that is missing, or a
//! symlink put there since the Katalog loaded, fails the load rather than every call.

use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use orkestra_katalog::component::Spec;

/// Why the grant `files[index]` cannot be served.
#[derive(Debug, Clone, thiserror::Error)]
#[error("files[{index}].path{reason}")]
pub struct FileGrantError {
    pub index: usize,
    /// What is wrong, as it follows the field's name.
    pub reason: String,
}

/// At load: every granted directory is one, and still inside the folder it was granted from.
pub fn check(spec: &Spec) -> Result<(), FileGrantError> {
    for (index, mount) in spec.files.iter().enumerate() {
        let inside = mount.host.strip_prefix(&mount.folder).unwrap_or(&mount.host);
        if let Some(reason) = orkestra_katalog::component::outside(&mount.folder, inside) {
            let reason = format!(" {reason}");
            return Err(FileGrantError { index, reason });
        }
        if !mount.host.is_dir() {
            let reason = format!(": {} is not a directory", mount.host.display());
            return Err(FileGrantError { index, reason });
        }
    }
    Ok(())
}

/// Per call: a WASI context with no filesystem but the granted directories, each read-only.
pub fn grant(spec: &Spec) -> Result<WasiCtxBuilder, String> {
    let mut wasi = WasiCtx::builder();
    for mount in &spec.files {
        wasi.preopened_dir(&mount.host, &mount.guest, FsPerms::ReadOnly)
            .map_err(|e| format!("files: cannot open {}: {e}", mount.host.display()))?;
    }
    Ok(wasi)
}
