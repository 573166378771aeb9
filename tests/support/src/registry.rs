//! A real OCI registry on loopback (Debian's `docker-registry`, the CNCF Distribution
//! registry), with its storage in a temporary folder and, optionally, htpasswd users: what
//! the tests push components to and the runtime pulls them from.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use base64::Engine as _;

/// A running registry, stopped when dropped.
pub struct Registry {
    /// `127.0.0.1:PORT`, as references and credentials name it.
    pub addr: String,
    dir: tempfile::TempDir,
    child: Option<Child>,
    user: Option<(String, String)>,
}

/// The registry binary: `ORK_TEST_REGISTRY`, else `docker-registry` (or `registry`) on PATH.
fn binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("ORK_TEST_REGISTRY") {
        return Ok(path.into());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
        for name in ["docker-registry", "registry"] {
            if dir.join(name).is_file() {
                return Ok(dir.join(name));
            }
        }
    }
    bail!(
        "no OCI registry binary: install Debian's docker-registry (apt-get install docker-registry) or set ORK_TEST_REGISTRY"
    )
}

impl Registry {
    /// Starts a registry; with `user`, every request needs that user's basic credentials.
    pub async fn start(user: Option<(&str, &str)>) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
            dir.path().join("data").display()
        );
        if let Some((name, password)) = user {
            let hash = bcrypt::hash(password, 4)?;
            std::fs::write(dir.path().join("htpasswd"), format!("{name}:{hash}\n"))?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: orkestra-tests\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        std::fs::write(dir.path().join("config.yml"), config)?;
        let mut registry = Self {
            addr,
            dir,
            child: None,
            user: user.map(|(n, p)| (n.to_string(), p.to_string())),
        };
        registry.launch().await?;
        Ok(registry)
    }

    /// Starts the process on the same storage and port (after [`Registry::stop`]).
    pub async fn launch(&mut self) -> anyhow::Result<()> {
        let log = std::fs::File::create(self.dir.path().join("registry.log"))?;
        let child = Command::new(binary()?)
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting the registry")?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = format!("http://{}/v2/", self.addr);
        loop {
            // 200 open, 401 with auth: either way it serves.
            if let Ok(response) = reqwest::get(&url).await
                && matches!(response.status().as_u16(), 200 | 401)
            {
                return Ok(());
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("the registry exited with {status}:\n{}", self.log());
            }
            if Instant::now() > deadline {
                bail!("the registry did not answer on {url} within 30s:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the process; its storage stays.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// A Docker config (`config.json` text) with this registry's user, as `docker login`
    /// writes it.
    pub fn docker_config(&self) -> String {
        let mut auths = serde_json::Map::new();
        if let Some((name, password)) = &self.user {
            let auth = base64::engine::general_purpose::STANDARD.encode(format!("{name}:{password}"));
            auths.insert(self.addr.clone(), serde_json::json!({ "auth": auth }));
        }
        serde_json::json!({ "auths": auths }).to_string()
    }

    /// Writes [`Registry::docker_config`] to `dir/config.json`, returning its path.
    pub fn write_docker_config(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let path = dir.join("config.json");
        std::fs::write(&path, self.docker_config())?;
        Ok(path)
    }

    /// A request to the registry's HTTP API (`path` from `/v2/`), with its user's
    /// credentials.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = reqwest::Client::new().request(method, format!("http://{}{path}", self.addr));
        match &self.user {
            Some((name, password)) => request.basic_auth(name, Some(password)),
            None => request,
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}
