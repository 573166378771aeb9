//! A hook for the `website` Katalog: after the templates applied the Deployment, it renders
//! the site's content into a ConfigMap (merging the namespace's optional `site-defaults`
//! ConfigMap, read through the host), and reports the page size in the status.

use orkestra_guest::{Hook, Request, Resource, Response, export_hook, json, kube, log};

struct Website;

impl Hook for Website {
    fn on_reconcile(request: Request) -> Response {
        let title = request.spec()["title"].as_str().unwrap_or("Welcome");
        let body = request.spec()["body"].as_str().unwrap_or_default();
        let footer = match kube::get("v1", "ConfigMap", None, "site-defaults") {
            Ok(defaults) => defaults["data"]["footer"].as_str().unwrap_or_default().to_string(),
            Err(kube::Error::NotFound) => String::new(),
            Err(error) => return Response::error("DefaultsUnreadable", error.to_string()),
        };
        let greeting = request.args()["greeting"].as_str().unwrap_or("Hello");
        let page = format!("<h1>{greeting}: {title}</h1>\n<p>{body}</p>\n<footer>{footer}</footer>\n");
        log::debug(&format!("rendered {} bytes for {}", page.len(), request.key()));
        let site = request.args()["site"].as_str().unwrap_or(request.name());
        let content = Resource::new("v1", "ConfigMap", &format!("{}-content", request.name()))
            .label("app", site)
            .field("data", json!({ "index.html": page }));
        Response::ok()
            .resource(content)
            .status("pageBytes", page.len())
            .status("renderedBy", "rust-hook")
    }

    fn on_delete(request: Request) -> Response {
        log::info(&format!("{} is going; its ConfigMap goes with it", request.key()));
        Response::ok()
    }
}

export_hook!(Website);
