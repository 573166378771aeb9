//! The smallest useful hook, for the host's per-call benchmark: reads one field of the
//! custom resource through a typed parse and echoes it into the status.

use orkestra_guest::{Deserialize, Hook, Request, Response, export_hook};

struct Echo;

#[derive(Deserialize)]
#[serde(crate = "orkestra_guest::serde")]
struct Cr {
    #[serde(default)]
    spec: Spec,
}

#[derive(Deserialize, Default)]
#[serde(crate = "orkestra_guest::serde")]
struct Spec {
    #[serde(default)]
    mode: String,
}

impl Hook for Echo {
    fn on_reconcile(request: Request) -> Response {
        let mode = request.parse::<Cr>().map(|cr| cr.spec.mode).unwrap_or_default();
        Response::ok().status("mode", mode)
    }
}

export_hook!(Echo);
