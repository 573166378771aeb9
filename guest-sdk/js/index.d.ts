// Types of @orkestra-rs/guest (index.js), for TypeScript hooks. The WIT records and imports
// come from wit/, generated from the repository's wit/ by jco (scripts/js-types.mjs).

/// <reference path="./wit/hook.d.ts" />

type WitRequest = import("orkestra:operator/types@0.1.0").Request;
type WitResponse = import("orkestra:operator/types@0.1.0").Response;
type WitKubeError = import("orkestra:operator/kube@0.1.0").KubeError;
type WitLevel = import("orkestra:operator/log@0.1.0").Level;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Obj = { [key: string]: any };

/**
 * The WIT request record as QuickJS passes it: jco's types, except that an absent option
 * may be `null` and a u64 is a number.
 */
export type RawRequest = Omit<WitRequest, "target" | "eventId"> & {
  target?: string | null;
  eventId?: number | null;
};

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

/** The WIT response record as the SDK builds it for QuickJS (a u64 is a number). */
export type RawResponse = Omit<WitResponse, "outcome"> & {
  outcome: Exclude<WitResponse["outcome"], { tag: "requeue-after" }> | { tag: "requeue-after"; val: number };
};

export declare class Response {
  static ok(): Response;
  static requeueAfter(milliseconds: number): Response;
  static error(reason: string, message: string): Response;
  resource(resource: Resource | Obj): Response;
  status(key: string, value: Json): Response;
  event(reason: string, message: string, warning?: boolean): Response;
  build(): RawResponse;
}

export declare class KubeError extends Error {
  readonly kind: WitKubeError["tag"];
}

export declare const kube: {
  get(apiVersion: string, kind: string, name: string, namespace?: string): Obj;
  list(apiVersion: string, kind: string, namespace?: string, labelSelector?: string): Obj[];
  apply(object: Resource | Obj): Obj;
  delete(apiVersion: string, kind: string, name: string, namespace?: string): void;
  patchStatus(apiVersion: string, kind: string, name: string, status: Obj, namespace?: string): Obj;
};

export declare const log: { [level in WitLevel]: (message: string) => void };

export interface Hook {
  onReconcile(request: Request): Response;
  onDelete?(request: Request): Response;
  onNotFound?(request: Request): Response;
}

/** The `hooks` export: the functions of orkestra:operator/hooks, over the raw records. */
export declare function hooks(impl: Hook): {
  onReconcile(raw: RawRequest): RawResponse;
  onDelete(raw: RawRequest): RawResponse;
  onNotFound(raw: RawRequest): RawResponse;
};
