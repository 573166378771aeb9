// Module resolution for the unit tests: every orkestra:operator interface is host.mjs.
export async function resolve(specifier, context, next) {
  if (specifier.startsWith("orkestra:operator/")) {
    return { url: new URL("./host.mjs", import.meta.url).href, shortCircuit: true };
  }
  return next(specifier, context);
}
