//! A finding of a Katalog's load (an error or a warning), located in its file: what
//! `ork validate` prints and [`crate::error::Error::Invalid`] lists.

use std::fmt;
use std::path::PathBuf;

/// One finding, located in a file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    /// Dot path of the field (`spec.crds.web.operatorBox.reconcile.workers`); may be empty.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}
