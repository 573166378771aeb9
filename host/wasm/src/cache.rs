//! The on-disk cache of compiled components, keyed by the component's sha256 and the
//! engine's compatibility hash.
//!
//! A compiled artifact is native code that wasmtime does not validate when it loads it, so
//! the host loads only artifacts it wrote itself: the folder is created private (0700) and
//! refused when another user owns it or others may write to it, and each artifact carries a
//! sha256 of its bytes that is checked before it is deserialized.

use crate::error::Error;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Where compiled components live.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: PathBuf,
    /// Distinguishes artifacts of other wasmtime versions or engine settings.
    engine_key: String,
}

impl ArtifactCache {
    /// Opens (creating) `dir` for `engine`; errors say why the folder cannot be trusted.
    pub fn open(dir: PathBuf, engine: &wasmtime::Engine) -> Result<Self, Error> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::Store(format!("cannot create the component cache {}: {e}", dir.display())))?;
        let meta = std::fs::metadata(&dir).map_err(|e| Error::Store(format!("{}: {e}", dir.display())))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me || meta.permissions().mode() & 0o022 != 0 {
            return Err(Error::Store(format!(
                "the component cache {} must be owned by this user and writable by no one else",
                dir.display()
            )));
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(Self {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
        })
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    /// The artifact of `digest`, if one is stored intact.
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let stored = std::fs::read(self.path(digest)).ok()?;
        let (sum, artifact) = stored.split_at_checked(32)?;
        (Sha256::digest(artifact).as_slice() == sum).then(|| artifact.to_vec())
    }

    /// Stores an artifact (written to a temporary file, then renamed into place).
    pub fn put(&self, digest: &str, artifact: &[u8]) -> std::io::Result<()> {
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        file.write_all(&Sha256::digest(artifact))?;
        file.write_all(artifact)?;
        file.persist(self.path(digest)).map_err(|e| e.error)?;
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Lowercase hex sha256 of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of a hash.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_round_trip_and_tampering_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let engine = wasmtime::Engine::default();
        let cache = ArtifactCache::open(dir.path().join("c"), &engine).unwrap();
        assert!(cache.get("d").is_none());
        cache.put("d", b"native code").unwrap();
        assert_eq!(cache.get("d").as_deref(), Some(&b"native code"[..]));
        let path = cache.path("d");
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&path, bytes).unwrap();
        assert!(cache.get("d").is_none(), "a changed artifact is never loaded");
    }

    #[test]
    fn a_folder_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = ArtifactCache::open(dir.path().to_path_buf(), &wasmtime::Engine::default()).unwrap_err();
        assert!(error.to_string().contains("writable by no one else"), "{error}");
    }
}
