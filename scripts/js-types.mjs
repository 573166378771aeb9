// Generates the TypeScript declarations of the WIT `hook` world for the JS guest SDK
// (guest-sdk/js/wit/) with jco's own type generator, so the raw records and the imported
// functions the SDK wraps are typed from wit/ and cannot drift from it.
//   node scripts/js-types.mjs           write them
//   node scripts/js-types.mjs --check   exit 1 when the committed ones differ
// jco-transpile comes from the examples' npm workspace (scripts/guests.sh --install).

import { createRequire } from "node:module";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, "guest-sdk/js/wit");
const check = process.argv.includes("--check");

const require = createRequire(join(root, "examples/package.json"));
const load = (name) => import(pathToFileURL(require.resolve(name)).href);
// jco reads the WIT through its WASI shim, whose filesystem starts with no directories.
const shim = await load("@bytecodealliance/preview2-shim/filesystem");
shim._setPreopens({ [root]: root });
const { generateGuestTypes } = await load("@bytecodealliance/jco-transpile");

const files = await generateGuestTypes(join(root, "wit"), { worldName: "hook", outDir: `${out}/` });
const stale = [];
for (const [path, bytes] of Object.entries(files)) {
  const text = `// Generated from wit/ by scripts/js-types.mjs (jco); do not edit.\n${new TextDecoder().decode(bytes)}`;
  if (check) {
    let committed = "";
    try {
      committed = readFileSync(path, "utf8");
    } catch {}
    if (committed !== text) stale.push(relative(root, path));
  } else {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  }
}
if (stale.length) {
  console.error(`out of date with wit/ (run node scripts/js-types.mjs): ${stale.join(", ")}`);
  process.exit(1);
}
