"""The echo hook of the host's per-call benchmark, in Python: the same work as the Rust
`echo-hook` (read `spec.mode` of the custom resource, echo it into the status), so the
languages are compared on one job."""

from orkestra_guest import Hook, Request, Response, hooks


class Echo(Hook):
    def on_reconcile(self, request: Request) -> Response:
        return Response.ok().status("mode", request.spec.get("mode", ""))


Hooks = hooks(Echo)
