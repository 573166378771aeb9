// Runs the SDK under Node for its unit tests: the WIT imports (orkestra:operator/...) are
// answered by host.mjs, which records each call and fails where a test asks it to.
import { register } from "node:module";

register("./resolve.mjs", import.meta.url);
