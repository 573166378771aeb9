//! Pulled manifests and components, kept by their sha256 beside the compiled artifacts, so a
//! restart, a second target or a registry outage needs no pull. Every read is checked
//! against the name it is kept under: a changed file is dropped and pulled again.

use crate::error::Error;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct BlobStore {
    dir: PathBuf,
}

impl BlobStore {
    /// `dir/sha256`, created private like the artifact cache it sits in.
    pub fn open(dir: PathBuf) -> Result<Self, Error> {
        let dir = dir.join("sha256");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::Store(format!("cannot create the blob store {}: {e}", dir.display())))?;
        Ok(Self { dir })
    }

    /// The blob of lowercase hex sha256 `digest`, when one is kept intact.
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.dir.join(digest);
        let bytes = std::fs::read(&path).ok()?;
        if crate::cache::digest(&bytes) == digest {
            return Some(bytes);
        }
        tracing::warn!(path = %path.display(), "a kept blob does not match its digest; pulling it again");
        let _ = std::fs::remove_file(&path);
        None
    }

    /// The file of the blob of `digest`, when one is kept intact.
    pub fn path_of(&self, digest: &str) -> Option<PathBuf> {
        self.get(digest).map(|_| self.dir.join(digest))
    }

    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Keeps `bytes`, whose sha256 the caller has checked is `digest`.
    pub fn put(&self, digest: &str, bytes: &[u8]) -> std::io::Result<()> {
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        file.write_all(bytes)?;
        file.persist(self.dir.join(digest)).map_err(|e| e.error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_comes_back_only_while_it_matches_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path().join("blobs")).unwrap();
        let digest = crate::cache::digest(b"component");
        assert!(store.get(&digest).is_none());
        store.put(&digest, b"component").unwrap();
        assert_eq!(store.get(&digest).as_deref(), Some(&b"component"[..]));
        std::fs::write(dir.path().join("blobs/sha256").join(&digest), b"tampered").unwrap();
        assert!(store.get(&digest).is_none(), "a changed blob is never handed out");
        assert!(
            !dir.path().join("blobs/sha256").join(&digest).exists(),
            "and it is dropped"
        );
    }
}
