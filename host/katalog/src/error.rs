//! What the crate refuses, one enum for its whole surface: loading (no file, an unreadable
//! file, unpulled motifs, the listed findings) and the values its compiled parts are asked to
//! take at run time. Messages name the field or the text that is wrong.

use std::path::PathBuf;

use crate::diagnostic::Diagnostic;

/// What the Katalog crate refuses: a Katalog that does not load, or a value that one of its
/// compiled parts (a component, a box, a conversion, a kind) cannot take.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No file was given.
    #[error("no Katalog file given: pass -f KATALOG (default katalog.yaml in the current directory)")]
    NoFiles,
    /// A file does not exist or cannot be read.
    #[error("cannot read Katalog file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The Katalog imports motifs from OCI registries that are not pulled: pull them (by
    /// their digest) and load again with their texts.
    #[error("the Katalog imports motifs that are not pulled: {}", names(motifs))]
    Unpulled { motifs: Vec<crate::oci::OciReference> },
    /// The Katalog has errors; every one is listed.
    #[error("{}", list(errors))]
    Invalid {
        errors: Vec<Diagnostic>,
        warnings: Vec<Diagnostic>,
    },
    /// A Katalog file `ork migrate` cannot read, or whose older and current shapes both set
    /// one key.
    #[error("{0}")]
    Migrate(String),
    /// A Katalog field whose value does not check, found when its part compiles (the message
    /// names the field): a requeue floor, a `normalize` or admission rule, a profile name.
    #[error("{0}")]
    Field(String),
    /// A webhook intake entry's `repository` or `watch` glob that is wrong.
    #[error("{0}")]
    Intake(String),
    /// An `oci://` component or motif reference that does not parse.
    #[error(transparent)]
    OciReference(#[from] crate::oci::InvalidReference),
    /// A component's declared spec (a world, limits, instances, rollout, files) that does not
    /// compile.
    #[error("{0}")]
    ComponentSpec(String),
    /// An API access a component's capabilities do not grant: the message of its
    /// `forbidden` answer.
    #[error("{0}")]
    NotGranted(String),
    /// A namespace the operator box does not let the host write in or read from.
    #[error("{0}")]
    Placement(String),
    /// A template whose value does not evaluate or does not convert to its declared type.
    #[error("{0}")]
    Typed(String),
    /// An object a CRD's conversion cannot take to the asked version.
    #[error("{0}")]
    Conversion(String),
    /// A serve token that may not do what it asked of a target (the message names the token,
    /// the target and what is missing).
    #[error("{0}")]
    NotPermitted(String),
    /// A `normalize` field whose template fails on a CR: the field, and why.
    #[error("{0}")]
    Normalize(String),
    /// A kind's fields (or a profile they name) that do not render into an object.
    #[error("{0}")]
    Render(String),
}

fn names(motifs: &[crate::oci::OciReference]) -> String {
    motifs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

fn list(errors: &[Diagnostic]) -> String {
    let mut text = format!("the Katalog has {} error(s):", errors.len());
    for error in errors {
        text.push_str(&format!("\n  {error}"));
    }
    text
}

/// Where the text is the value (a finding's message, a condition's), an error is its message.
impl From<Error> for String {
    fn from(error: Error) -> Self {
        error.to_string()
    }
}
