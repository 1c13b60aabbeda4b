/** Bun: runs the suite with the configuration in its first argument; prints the results. */
import { runSuite } from "./suite.js";

console.log(JSON.stringify(await runSuite(JSON.parse(process.argv[2]!))));
