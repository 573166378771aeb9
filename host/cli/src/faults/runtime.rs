//! The runtime under test: `ork run` of this same binary, started, watched for idleness,
//! killed and restarted by the campaign.

use super::*;

/// The runtime under test: `ork run` of this same binary, through the proxy.
pub(super) struct Runtime {
    child: std::process::Child,
}

impl Runtime {
    pub(super) fn start(bench: &Bench, log: &Path, namespace: &str, fault: Fault) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("the path of ork itself")?;
        let file = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
        let mut command = std::process::Command::new(exe);
        match fault {
            Fault::ComponentTraps(every) => {
                command.env(orkestra_wasm::failpoint::TRAP_EVERY, every.to_string());
            }
            Fault::Webhook(misbehaviour) => {
                command.env(orkestra_gateway::failpoint::WEBHOOK, misbehaviour.to_string());
            }
            _ => {}
        }
        let child = command
            .args(["run", "-f"])
            .arg(&bench.katalog)
            // Its Live API says when it is idle (components loaded, no reconcile running).
            // The webhooks the Katalog enables are its own, on a port of their own; what the
            // gateway keeps (the Serve API's token Secrets) goes with the scenario.
            .args([
                "--http-addr",
                "127.0.0.1:0",
                "--https-addr",
                "127.0.0.1:0",
                "--gateway-namespace",
                namespace,
                "--state-namespace",
                namespace,
            ])
            .env("KUBECONFIG", &bench.kubeconfig)
            .env("ORK_API_TOKEN", "")
            .stdin(std::process::Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .context("starting ork run")?;
        Ok(Self { child })
    }

    /// How it ended, when it has.
    pub(super) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub(super) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and the exit it comes to (killed if it outlasts `within`).
    pub(super) async fn stop(mut self, within: Duration) {
        // SAFETY: kill(2) on the pid of our own child.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.kill();
    }
}

/// Whether the runtime whose output is in `log` (its latest start) is idle: every component
/// loaded or refused, no reconcile running.
pub(super) async fn idle(http: &reqwest::Client, log: &Path) -> bool {
    let said = std::fs::read_to_string(log).unwrap_or_default();
    let Some(url) = said
        .lines()
        .rev()
        .find_map(|l| l.split("Live API on ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
    else {
        return false;
    };
    let get = |path: &str| {
        let url = format!("{url}{path}");
        async move {
            let response = http.get(url).timeout(Duration::from_secs(2)).send().await.ok()?;
            let bytes = orkestra_net::read::bounded(response, orkestra_control_center::runtimes::ANSWER_LIMIT)
                .await
                .ok()?;
            serde_json::from_slice::<serde_json::Value>(&bytes).ok()
        }
    };
    let (Some(components), Some(katalog)) = (get("/components").await, get("/katalog").await) else {
        return false;
    };
    let loaded = components["components"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|c| c["revision"].as_u64().is_some_and(|r| r > 0) || !c["lastError"].is_null());
    let busy = katalog["crds"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["workers"]["busy"].as_u64().is_some_and(|b| b > 0));
    loaded && !busy
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.kill();
        }
    }
}
