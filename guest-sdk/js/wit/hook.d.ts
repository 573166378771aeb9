// Generated from wit/ by scripts/js-types.mjs (jco); do not edit.
/// <reference path="./interfaces/orkestra-operator-hooks.d.ts" />
/// <reference path="./interfaces/orkestra-operator-kube.d.ts" />
/// <reference path="./interfaces/orkestra-operator-log.d.ts" />
/// <reference path="./interfaces/orkestra-operator-types.d.ts" />
declare module 'orkestra:operator/hook@0.1.0' {
  export type * as OrkestraOperatorKube010 from 'orkestra:operator/kube@0.1.0'; // import orkestra:operator/kube@0.1.0
  export type * as OrkestraOperatorLog010 from 'orkestra:operator/log@0.1.0'; // import orkestra:operator/log@0.1.0
  export type * as OrkestraOperatorTypes010 from 'orkestra:operator/types@0.1.0'; // import orkestra:operator/types@0.1.0
  export * as hooks from 'orkestra:operator/hooks@0.1.0'; // export orkestra:operator/hooks@0.1.0
}
