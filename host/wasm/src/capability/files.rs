//! `files`: directories granted read-only. wasmtime-wasi holds each as a cap-std directory,
//! so neither `..` nor a symlink leads out of it; a granted directory that is missing, or a
//! symlink put there since the Katalog loaded, fails the load rather than every call.
//!
//! Every file a guest opens is a descriptor of the host process, outside the instance's
//! memory limit: an instance may hold at most [`MAX_OPEN_FILES`] at once (an `open-at` past
//! it answers `quota`), and an instance holding any when its call ends is not kept warm, so
//! what it opened is closed with it.

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView as _};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, Host as _, HostDescriptor as _, OpenFlags, PathFlags,
};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiView};

use super::super::caller::Caller;
use orkestra_katalog::component::Mount;

/// Files and directories one instance may hold open at once, its granted directories and
/// directory listings included.
pub const MAX_OPEN_FILES: usize = 64;

/// The interface `open-at` is shadowed in: the name wasmtime-wasi links it under.
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// Files, directories and directory listings the instance of `table` holds open now.
pub fn open_files(table: &mut ResourceTable) -> usize {
    table
        .iter_mut()
        .filter(|entry| entry.is::<Descriptor>() || entry.is::<wasmtime_wasi::p2::ReaddirIterator>())
        .count()
}

/// Whether the instance of `table` holds more open than its `mounts` granted directories
/// (which every guest's libc opens once and keeps).
pub fn holds_open(table: &mut ResourceTable, mounts: usize) -> bool {
    open_files(table) > mounts
}

/// What the capped `open-at` reads of a call's store: its WASI view (whose table holds the
/// open descriptors) and who is calling, for the log.
pub trait OpenFiles: WasiView + 'static {
    fn caller(&self) -> &Caller;
}

/// Replaces wasmtime-wasi's `open-at` with one that first checks the instance's open files.
pub fn cap_open_files<T: OpenFiles>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let shadowed = linker.instance(FILESYSTEM_TYPES).and_then(|mut types| {
        types.func_wrap_async(
            "[method]descriptor.open-at",
            |mut store: StoreContextMut<'_, T>,
             (at, path_flags, path, open_flags, flags): (
                Resource<Descriptor>,
                PathFlags,
                String,
                OpenFlags,
                DescriptorFlags,
            )| {
                Box::new(async move {
                    let state = store.data_mut();
                    if open_files(state.ctx().table) >= MAX_OPEN_FILES {
                        let caller = state.caller();
                        tracing::debug!(component = %caller.component, key = %caller.key,
                            "open-at refused: the instance holds {MAX_OPEN_FILES} open files");
                        return Ok((Err(ErrorCode::Quota),));
                    }
                    let mut view = state.filesystem();
                    let opened = view.open_at(at, path_flags, path, open_flags, flags).await;
                    Ok((match opened {
                        Ok(file) => Ok(file),
                        Err(error) => Err(view.convert_error_code(error)?),
                    },))
                })
            },
        )
    });
    linker.allow_shadowing(false);
    shadowed
}

/// Why the grant `files[index]` cannot be served.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FileGrantError {
    /// It leads out of the Katalog's folder (the Katalog's own check says how).
    #[error("files[{index}].path {why}")]
    Outside { index: usize, why: String },
    #[error("files[{index}].path: {} is not a directory", path.display())]
    NotADirectory { index: usize, path: std::path::PathBuf },
}

/// At load: every granted directory is one, and still inside the folder it was granted from.
pub fn check(files: &[Mount]) -> Result<(), FileGrantError> {
    for (index, mount) in files.iter().enumerate() {
        let inside = mount.host.strip_prefix(&mount.folder).unwrap_or(&mount.host);
        if let Some(why) = orkestra_katalog::component::outside(&mount.folder, inside) {
            return Err(FileGrantError::Outside { index, why });
        }
        if !mount.host.is_dir() {
            let path = mount.host.clone();
            return Err(FileGrantError::NotADirectory { index, path });
        }
    }
    Ok(())
}

/// Per call: a WASI context with no filesystem but the granted directories, each read-only.
pub fn grant(files: &[Mount]) -> Result<WasiCtxBuilder, String> {
    let mut wasi = WasiCtx::builder();
    for mount in files {
        wasi.preopened_dir(&mount.host, &mount.guest, FsPerms::ReadOnly)
            .map_err(|e| format!("files: cannot open {}: {e}", mount.host.display()))?;
    }
    Ok(wasi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_that_is_no_longer_a_directory_inside_its_folder_fails_the_load_by_index() {
        let folder = tempfile::tempdir().unwrap();
        let base = folder.path().to_path_buf();
        std::fs::create_dir(base.join("data")).unwrap();
        std::fs::write(base.join("file"), "x").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), base.join("away")).unwrap();
        let mount = |path: &str| Mount {
            host: base.join(path),
            guest: "/data".into(),
            folder: base.clone(),
        };
        assert!(check(&[mount("data")]).is_ok());
        let error = check(&[mount("data"), mount("file")]).unwrap_err();
        assert!(
            matches!(error, FileGrantError::NotADirectory { index: 1, .. }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!("files[1].path: {} is not a directory", base.join("file").display())
        );
        let error = check(&[mount("away")]).unwrap_err();
        assert!(matches!(error, FileGrantError::Outside { index: 0, .. }), "{error:?}");
        assert!(error.to_string().starts_with("files[0].path "), "{error}");
    }
}
