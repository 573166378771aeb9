// A hook for the `notes` Katalog, in TypeScript (componentize-qjs): each Note gets a
// ConfigMap holding its text in the case its spec asks for, signed with the namespace's
// optional `note-defaults` ConfigMap (read through the host), and the status says how long
// the text is. The SDK is imported by path; the build's --module-root (the repository) lets
// componentize-qjs resolve it.

import { Hook, KubeError, Request, Resource, Response, hooks as exportHooks, kube, log } from "../../guest-sdk/js/index.js";

const CASES: Record<string, (text: string) => string> = {
  upper: (text) => text.toUpperCase(),
  lower: (text) => text.toLowerCase(),
  as: (text) => text,
};

const notes: Hook = {
  onReconcile(request: Request): Response {
    const text = String(request.spec.text ?? "");
    const style = String(request.spec.case ?? "as");
    const change = CASES[style];
    if (!change) {
      return Response.error("UnknownCase", `case ${JSON.stringify(style)} is not one of upper, lower, as`);
    }
    let signature = "";
    try {
      signature = String(kube.get("v1", "ConfigMap", "note-defaults").data?.signature ?? "");
    } catch (error) {
      if (!(error instanceof KubeError && error.kind === "not-found")) {
        return Response.error("DefaultsUnreadable", String(error));
      }
    }
    const body = change(text) + (signature ? `\n-- ${signature}` : "");
    log.debug(`${request.key}: ${body.length} characters`);
    return Response.ok()
      .resource(new Resource("v1", "ConfigMap", `${request.name}-note`).label("app", "notes").field("data", { text: body }))
      .status("length", body.length)
      .status("renderedBy", "js-hook")
      .event("Written", `wrote ${body.length} characters`);
  },
};

export const hooks = exportHooks(notes);
