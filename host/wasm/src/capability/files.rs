//! `files`: directories granted read-only. wasmtime-wasi holds each as a cap-std directory,
//! so neither `..` nor a symlink leads out of it; a granted directory that is missing, or a
//! symlink put there since the Katalog loaded, fails the load rather than every call.

use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use orkestra_katalog::component::Mount;

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
