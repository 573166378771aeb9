// @orkestra-rs/guest: the Rust SDK's layer (guest-sdk/src) for JavaScript and TypeScript
// hooks built with componentize-qjs (QuickJS, also jco's `--backend quickjs`). A Request that
// parses the custom resource once, a Response built by chaining, Resource for children, kube
// calls that return objects and throw KubeError, and log. `hooks(impl)` makes the `hooks`
// export componentize-qjs wires to the orkestra:operator/hooks interface.

import * as host from "orkestra:operator/kube@0.1.0";
import { log as hostLog } from "orkestra:operator/log@0.1.0";

/** One reconcile of one custom resource; the object and context are parsed on first use. */
export class Request {
  constructor(raw) {
    this.raw = raw;
    this.key = raw.key;
    this.sentinels = raw.sentinels ?? [];
    // QuickJS passes an absent option as null.
    this.target = raw.target ?? undefined;
  }

  /** The custom resource (empty in onNotFound). */
  get object() {
    this._object ??= this.raw.object ? JSON.parse(this.raw.object) : {};
    return this._object;
  }

  /** What the pipeline knows: health, metrics, cross, external, args, children. */
  get context() {
    this._context ??= JSON.parse(this.raw.context || "{}");
    return this._context;
  }

  get name() {
    return this.key.split("/").pop();
  }

  get namespace() {
    return this.key.includes("/") ? this.key.split("/")[0] : undefined;
  }

  get spec() {
    return this.object.spec ?? {};
  }

  get status() {
    return this.object.status ?? {};
  }

  /** The Katalog's templated hook arguments. */
  get args() {
    return this.context.args ?? {};
  }

  /** The children the templates applied (hooks that run after them). */
  get children() {
    return this.context.children ?? {};
  }
}

/** A child object the host applies, owned by the custom resource. */
export class Resource {
  constructor(apiVersion, kind, name) {
    this.object = { apiVersion, kind, metadata: { name } };
  }

  namespace(namespace) {
    this.object.metadata.namespace = namespace;
    return this;
  }

  label(key, value) {
    (this.object.metadata.labels ??= {})[key] = value;
    return this;
  }

  annotation(key, value) {
    (this.object.metadata.annotations ??= {})[key] = value;
    return this;
  }

  /** A top-level field such as `spec` or `data`. */
  field(key, value) {
    this.object[key] = value;
    return this;
  }
}

/** What a call returns: an outcome, children, status fields and events. */
export class Response {
  constructor(outcome) {
    this.outcome = outcome;
    this.resources = [];
    this.fields = {};
    this.events = [];
  }

  static ok() {
    return new Response({ tag: "ok" });
  }

  static requeueAfter(milliseconds) {
    // A u64 crosses as a plain number in QuickJS (a BigInt traps the call); never negative.
    return new Response({ tag: "requeue-after", val: Math.max(0, Math.round(Number(milliseconds))) });
  }

  /** Ready=False with `reason` (CamelCase), then a retry with backoff. */
  static error(reason, message) {
    return new Response({ tag: "error", val: { reason, message } });
  }

  /** A Resource or a plain object. */
  resource(resource) {
    this.resources.push(JSON.stringify(resource instanceof Resource ? resource.object : resource));
    return this;
  }

  status(key, value) {
    this.fields[key] = value;
    return this;
  }

  event(reason, message, warning = false) {
    this.events.push({ eventType: warning ? "warning" : "normal", reason, message });
    return this;
  }

  /** The WIT record the host reads. */
  build() {
    const hasStatus = Object.keys(this.fields).length > 0;
    return {
      outcome: this.outcome,
      resources: this.resources,
      status: hasStatus ? JSON.stringify(this.fields) : undefined,
      events: this.events,
    };
  }
}

/** A kube call that did not happen or did not succeed: `kind` is forbidden, not-found, rejected or unavailable. */
export class KubeError extends Error {
  constructor(kind, message) {
    super(message ?? kind);
    this.kind = kind;
  }
}

function call(thunk) {
  try {
    return thunk();
  } catch (error) {
    // A result's error case arrives as an Error whose payload is { tag, val }.
    const failure = error?.payload ?? error;
    if (failure && typeof failure.tag === "string") {
      throw new KubeError(failure.tag, failure.val ?? failure.tag);
    }
    throw error;
  }
}

const ref = (apiVersion, kind, name, namespace) => ({ apiVersion, kind, namespace, name });

/** Reads and writes through the host, each checked against the Katalog's capabilities. */
export const kube = {
  get: (apiVersion, kind, name, namespace) => JSON.parse(call(() => host.get(ref(apiVersion, kind, name, namespace)))),
  list: (apiVersion, kind, namespace, labelSelector) =>
    call(() => host.listObjects(apiVersion, kind, namespace, labelSelector)).map((o) => JSON.parse(o)),
  apply: (object) => JSON.parse(call(() => host.apply(JSON.stringify(object instanceof Resource ? object.object : object)))),
  delete: (apiVersion, kind, name, namespace) => call(() => host.delete(ref(apiVersion, kind, name, namespace))),
  patchStatus: (apiVersion, kind, name, status, namespace) =>
    JSON.parse(call(() => host.patchStatus(ref(apiVersion, kind, name, namespace), JSON.stringify(status)))),
};

/** Log lines the host writes as structured records (within the component's logBytes). */
export const log = {
  debug: (message) => hostLog("debug", message),
  info: (message) => hostLog("info", message),
  warn: (message) => hostLog("warn", message),
  error: (message) => hostLog("error", message),
};

/**
 * The `hooks` export: `impl.onReconcile(request)` (required), `onDelete` and `onNotFound`
 * (default: ok), each given a Request and returning a Response.
 */
export function hooks(impl) {
  const run = (method) => (raw) => {
    const handler = impl[method] ?? (() => Response.ok());
    return handler.call(impl, new Request(raw)).build();
  };
  return { onReconcile: run("onReconcile"), onDelete: run("onDelete"), onNotFound: run("onNotFound") };
}
