//! The control plane's credentials: service-account signing keys and a static admin token
//! (made once per instance directory with openssl, kept across restarts), and the
//! kubeconfig that hands them to clients.

use std::path::{Path, PathBuf};

use super::error::Error;
use super::instance::create_dir;

pub(super) struct Pki {
    pub(super) dir: PathBuf,
    pub(super) sa_private: PathBuf,
    pub(super) sa_public: PathBuf,
    pub(super) tokens: PathBuf,
    pub(super) token: String,
}

/// Service-account signing keys and the static admin token, created once per directory and
/// reused on restart so tokens already handed out stay valid.
pub(super) fn prepare_pki(dir: &Path) -> Result<Pki, Error> {
    let pki = dir.join("pki");
    create_dir(&pki.join("apiserver"))?;
    let sa_private = pki.join("sa.key");
    let sa_public = pki.join("sa.pub");
    if !sa_private.exists() || !sa_public.exists() {
        openssl(&["genrsa", "-out", &path_str(&sa_private), "2048"])?;
        openssl(&[
            "rsa",
            "-in",
            &path_str(&sa_private),
            "-pubout",
            "-out",
            &path_str(&sa_public),
        ])?;
    }
    let tokens = pki.join("tokens.csv");
    let token = match std::fs::read_to_string(&tokens) {
        Ok(text) => text.split(',').next().unwrap_or_default().to_string(),
        Err(_) => String::new(),
    };
    let token = if token.len() >= 32 {
        token
    } else {
        use rand::Rng;
        let token: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(40)
            .map(char::from)
            .collect();
        std::fs::write(&tokens, format!("{token},ork-admin,ork-admin,\"system:masters\"\n")).map_err(|source| {
            Error::DirNotWritable {
                dir: pki.clone(),
                source,
            }
        })?;
        token
    };
    Ok(Pki {
        dir: pki,
        sa_private,
        sa_public,
        tokens,
        token,
    })
}

fn path_str(path: &Path) -> String {
    path.display().to_string()
}

fn openssl(args: &[&str]) -> Result<(), Error> {
    let output = std::process::Command::new("openssl")
        .args(args)
        .output()
        .map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                Error::MissingTool {
                    tool: "openssl",
                    purpose: "create service-account keys",
                    package: "openssl",
                }
            } else {
                Error::Io {
                    action: "run openssl".into(),
                    source,
                }
            }
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command: format!("openssl {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// Writes a kubeconfig for the static admin token that trusts the API server's own CA.
pub(super) fn write_kubeconfig(path: &Path, port: u16, ca_pem: &[u8], token: &str) -> Result<(), Error> {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: ork
  cluster:
    server: https://127.0.0.1:{port}
    certificate-authority-data: {ca}
users:
- name: ork-admin
  user:
    token: {token}
contexts:
- name: ork
  context:
    cluster: ork
    user: ork-admin
    namespace: default
current-context: ork
"
    );
    std::fs::write(path, text).map_err(|source| Error::DirNotWritable {
        dir: path.parent().unwrap_or(path).to_path_buf(),
        source,
    })
}
