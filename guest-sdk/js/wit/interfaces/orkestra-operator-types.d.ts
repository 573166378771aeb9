// Generated from wit/ by scripts/js-types.mjs (jco); do not edit.
declare module 'orkestra:operator/types@0.1.0' {
  /**
   * Group, version and kind of a Kubernetes object. `group` is empty for the core group.
   */
  export interface Gvk {
    group: string,
    version: string,
    kind: string,
  }
  /**
   * One reconcile of one custom resource.
   */
  export interface Request {
    /**
     * `namespace/name`, or `name` for a cluster-scoped resource.
     */
    key: string,
    /**
     * The kind of the custom resource.
     */
    gvk: Gvk,
    /**
     * The serve target the resource is routed through, if any.
     */
    target?: string,
    /**
     * The custom resource as JSON; `none` only in `on-not-found`.
     */
    object?: string,
    /**
     * Set when the CRD keeps each admitted event as its own queue item (eventAware).
     */
    eventId?: bigint,
    /**
     * Names of the sentinels behind this run, such as `generationChanged` or `create`.
     */
    sentinels: Array<string>,
    /**
     * What the declarative pipeline knows at this point, as a JSON object: `health`,
     * `metrics`, `cross`, `external`, `args` (the Katalog's templated hook arguments) and,
     * for hooks that run after the templates, `children`.
     */
    context: string,
  }
  /**
   * A failed call: a short CamelCase reason (shown on the Ready condition) and a message.
   */
  export interface Failure {
    reason: string,
    message: string,
  }
  /**
   * What the host does next with the custom resource.
   */
  export type Outcome = OutcomeOk | OutcomeRequeueAfter | OutcomeError;
  /**
   * Done until the next event.
   */
  export interface OutcomeOk {
    tag: 'ok',
  }
  /**
   * Run again after this many milliseconds.
   */
  export interface OutcomeRequeueAfter {
    tag: 'requeue-after',
    val: bigint,
  }
  /**
   * The reconcile failed: Ready=False with this reason, then a retry with backoff.
   */
  export interface OutcomeError {
    tag: 'error',
    val: Failure,
  }
  /**
   * # Variants
   * 
   * ## `"normal"`
   * 
   * ## `"warning"`
   */
  export type EventType = 'normal' | 'warning';
  /**
   * A Kubernetes Event the host records on the custom resource.
   */
  export interface Event {
    eventType: EventType,
    reason: string,
    message: string,
  }
  /**
   * What a call returns. The host records `events` in every case; it applies `resources`
   * and merges `status` only when the outcome is not an error.
   */
  export interface Response {
    outcome: Outcome,
    /**
     * Desired child objects as JSON, applied with server-side apply and owned by the
     * custom resource. Each must be granted `apply` on its kind and namespace; at most the
     * component's `limits.children` (default 100), or the whole response is refused.
     */
    resources: Array<string>,
    /**
     * A JSON object merged into the custom resource's `.status` (its top-level fields;
     * `conditions` and `observedGeneration` stay the host's).
     */
    status?: string,
    /**
     * Events recorded on the custom resource; at most the component's `limits.events`
     * (default 10), or the whole response is refused.
     */
    events: Array<Event>,
  }
}
