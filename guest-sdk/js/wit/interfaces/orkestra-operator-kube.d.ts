// Generated from wit/ by scripts/js-types.mjs (jco); do not edit.
/// <reference path="./orkestra-operator-types.d.ts" />
declare module 'orkestra:operator/kube@0.1.0' {
  /**
   * The object as JSON. Verb `get`.
   */
  export function get(object: ObjectRef): string;
  /**
   * Objects of a kind as JSON, in a namespace or (with the grant `namespaces: ["*"]`)
   * everywhere, optionally filtered by a label selector. Verb `list`. Read page by page:
   * each page is one kube call, and every object counts against the byte budget; where
   * either is spent the call ends with `unavailable`.
   */
  export function listObjects(apiVersion: string, kind: string, namespace: string | undefined, labelSelector: string | undefined): Array<string>;
  /**
   * Server-side apply of a JSON object under the component's own field manager
   * (`orkestra-wasm/<crd>[/<target>]`); returns the object as stored. Verb `apply`.
   */
  export function apply(object: string): string;
  /**
   * Deletes the object. Verb `delete`.
   */
  export { _delete as delete };
  function _delete(object: ObjectRef): void;
  /**
   * Merges a JSON object into another object's status; returns the object as stored. Verb
   * `patch-status`. (A component writes its own custom resource's status through
   * `response.status`, which needs no grant.)
   */
  export function patchStatus(object: ObjectRef, status: string): string;
  export type Gvk = import('orkestra:operator/types@0.1.0').Gvk;
  /**
   * Names one object.
   */
  export interface ObjectRef {
    /**
     * `v1`, `apps/v1`, ...
     */
    apiVersion: string,
    kind: string,
    /**
     * Omitted for cluster-scoped kinds.
     */
    namespace?: string,
    name: string,
  }
  /**
   * Why a kube call did not happen or did not succeed.
   */
  export type KubeError = KubeErrorForbidden | KubeErrorNotFound | KubeErrorRejected | KubeErrorUnavailable;
  /**
   * No capability grants this verb on this kind in this namespace; names the grant.
   */
  export interface KubeErrorForbidden {
    tag: 'forbidden',
    val: string,
  }
  /**
   * The object does not exist.
   */
  export interface KubeErrorNotFound {
    tag: 'not-found',
  }
  /**
   * The API server refused the request (validation, conflict); its message.
   */
  export interface KubeErrorRejected {
    tag: 'rejected',
    val: string,
  }
  /**
   * The kind is not served, the server could not be reached, or the per-call budget of
   * kube calls or bytes is spent.
   */
  export interface KubeErrorUnavailable {
    tag: 'unavailable',
    val: string,
  }
}
