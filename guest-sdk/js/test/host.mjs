// A stand-in for the host's kube and log imports, shaped as QuickJS passes them: a result's
// error case is thrown as an Error whose payload is the WIT variant.
export const calls = [];
let failure;
let answer = "{}";

/** The next kube call fails with this kube-error variant, e.g. { tag: "not-found" }. */
export function failNext(variant) {
  failure = variant;
}

/** The next kube calls return this JSON text. */
export function answerWith(text) {
  answer = text;
}

function kube(name, args) {
  calls.push({ name, args });
  if (failure) {
    const payload = failure;
    failure = undefined;
    throw Object.assign(new Error("kube call failed"), { payload });
  }
  return answer;
}

export const get = (ref) => kube("get", [ref]);
export const listObjects = (...args) => {
  kube("list-objects", args);
  return [answer, answer];
};
export const apply = (object) => kube("apply", [object]);
function remove(ref) {
  kube("delete", [ref]);
}
export { remove as delete };
export const patchStatus = (ref, status) => kube("patch-status", [ref, status]);
export const log = (level, message) => calls.push({ name: "log", args: [level, message] });
