/** Deno: runs the suite with the configuration in its first argument; prints the results. */
import { runSuite } from "./suite.js";

declare const Deno: { readonly args: readonly string[] };

console.log(JSON.stringify(await runSuite(JSON.parse(Deno.args[0]!))));
