import { memoryStore } from "../../src/index.js";
import { runConformance } from "../conformance/run.js";

runConformance("memory", (now) => memoryStore({ now }));
runConformance("memory (tiny maxKeys)", (now) => memoryStore({ now, maxKeys: 4 }));
runConformance("memory (limitSync)", (now) => memoryStore({ now }), { sync: true });
