// Types of @orkestra-rs/guest (index.js), for TypeScript hooks.

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Obj = { [key: string]: any };

/** The WIT request record (orkestra:operator/types@0.1.0). */
export interface RawRequest {
  key: string;
  gvk: { group: string; version: string; kind: string };
  target?: string;
  object?: string;
  eventId?: bigint;
  sentinels: string[];
  context: string;
}

export declare class Request {
  constructor(raw: RawRequest);
  readonly raw: RawRequest;
  readonly key: string;
  readonly sentinels: string[];
  readonly target?: string;
  readonly object: Obj;
  readonly context: Obj;
  readonly name: string;
  readonly namespace?: string;
  readonly spec: Obj;
  readonly status: Obj;
  readonly args: Obj;
  readonly children: Obj;
}

export declare class Resource {
  constructor(apiVersion: string, kind: string, name: string);
  readonly object: Obj;
  namespace(namespace: string): Resource;
  label(key: string, value: string): Resource;
  annotation(key: string, value: string): Resource;
  field(key: string, value: Json): Resource;
}

export declare class Response {
  static ok(): Response;
  static requeueAfter(milliseconds: number): Response;
  static error(reason: string, message: string): Response;
  resource(resource: Resource | Obj): Response;
  status(key: string, value: Json): Response;
  event(reason: string, message: string, warning?: boolean): Response;
  build(): unknown;
}

export declare class KubeError extends Error {
  readonly kind: "forbidden" | "not-found" | "rejected" | "unavailable";
}

export declare const kube: {
  get(apiVersion: string, kind: string, name: string, namespace?: string): Obj;
  list(apiVersion: string, kind: string, namespace?: string, labelSelector?: string): Obj[];
  apply(object: Resource | Obj): Obj;
  delete(apiVersion: string, kind: string, name: string, namespace?: string): void;
  patchStatus(apiVersion: string, kind: string, name: string, status: Obj, namespace?: string): Obj;
};

export declare const log: {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
};

export interface Hook {
  onReconcile(request: Request): Response;
  onDelete?(request: Request): Response;
  onNotFound?(request: Request): Response;
}

export declare function hooks(impl: Hook): {
  onReconcile(raw: RawRequest): unknown;
  onDelete(raw: RawRequest): unknown;
  onNotFound(raw: RawRequest): unknown;
};
