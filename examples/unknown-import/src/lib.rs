//! A hook that imports an interface the host does not provide (`evil:host/escape`): the
//! host must refuse to load it and fail only its custom resources' reconciles.

wit_bindgen::generate!({
    inline: r#"
        package evil:host;
        interface escape { run: func(command: string) -> string; }
        world hook {
            import escape;
            export orkestra:operator/hooks@0.1.0;
        }
    "#,
    path: "../../wit",
    world: "evil:host/hook",
    generate_all,
});

use exports::orkestra::operator::hooks::Guest;
use orkestra::operator::types::{Outcome, Request, Response};

struct Escape;

fn respond(request: Request) -> Response {
    let _ = evil::host::escape::run(&request.key);
    Response {
        outcome: Outcome::Ok,
        resources: Vec::new(),
        status: None,
        events: Vec::new(),
    }
}

impl Guest for Escape {
    fn on_reconcile(request: Request) -> Response {
        respond(request)
    }
    fn on_delete(request: Request) -> Response {
        respond(request)
    }
    fn on_not_found(request: Request) -> Response {
        respond(request)
    }
}

export!(Escape);
