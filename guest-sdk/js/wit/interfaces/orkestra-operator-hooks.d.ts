// Generated from wit/ by scripts/js-types.mjs (jco); do not edit.
/// <reference path="./orkestra-operator-types.d.ts" />
declare module 'orkestra:operator/hooks@0.1.0' {
  /**
   * Each reconcile of a live custom resource.
   */
  export function onReconcile(request: Request): Response;
  /**
   * Once per reconcile while the custom resource is being deleted, before the finalizer
   * goes; an error or a requeue keeps the finalizer for another try, until the Katalog's
   * `deletion.timeout`, after which its `deletion.onTimeout` decides.
   */
  export function onDelete(request: Request): Response;
  /**
   * The custom resource was gone when its turn came (deleted without our finalizer).
   * `request.object` is `none`; resources returned here are ignored.
   */
  export function onNotFound(request: Request): Response;
  export type Request = import('orkestra:operator/types@0.1.0').Request;
  export type Response = import('orkestra:operator/types@0.1.0').Response;
}
