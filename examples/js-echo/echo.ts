// The echo hook of the host's per-call benchmark, in TypeScript: the same work as the Rust
// `echo-hook` (read `spec.mode` of the custom resource, echo it into the status), so the
// languages are compared on one job.

import { Request, Response, hooks as exportHooks } from "../../guest-sdk/js/index.js";

export const hooks = exportHooks({
  onReconcile(request: Request): Response {
    return Response.ok().status("mode", String(request.spec.mode ?? ""));
  },
});
