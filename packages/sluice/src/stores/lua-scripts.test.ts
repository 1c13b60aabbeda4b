import { createHash } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as embedded from "./lua-scripts.js";
import { ALGORITHM_CODES, OP_GIVE_BACK } from "./redis-keys.js";
import {
  OPERATION_CODES,
  OPS_PER_SPEC,
  SCRIPT_ALGORITHM_CODES,
  luaProtocol,
} from "./redis-protocol.js";

const dir = fileURLToPath(new URL("./lua/", import.meta.url));

// Pinned: a change to a script must be deliberate (update the hash here and re-run
// `npm run embed-lua -w sluice`). Redis caches scripts by this SHA1.
const PINNED: Record<string, string> = {
  "sluice.lua": "c89cee37ad18e95ce86d8640a0d89294de766184",
  "instances.lua": "87a8afea29cbc5660707a01031a1f17fb4aa54a7",
};

describe("embedded Lua scripts", () => {
  const scripts = Object.values(embedded).filter(
    (v): v is embedded.LuaScript => typeof v === "object" && v !== null && "sha" in v,
  );

  it("embeds every .lua file, with the same text", () => {
    const files = readdirSync(dir)
      .filter((f) => f.endsWith(".lua"))
      .sort();
    expect(scripts.map((s) => s.file).sort()).toEqual(files);
    for (const s of scripts)
      expect(s.text, `${s.file}: run npm run embed-lua -w sluice`).toBe(
        readFileSync(dir + s.file, "utf8"),
      );
  });

  it("carries the SHA1 of each text, equal to the pinned one", () => {
    for (const s of scripts) {
      expect(createHash("sha1").update(s.text).digest("hex")).toBe(s.sha);
      expect(s.sha, s.file).toBe(PINNED[s.file]);
    }
  });

  it("sluice.lua's protocol part is the one redis-protocol.ts generates", () => {
    const text = readFileSync(dir + "sluice.lua", "utf8");
    expect(text, "run npm run embed-lua -w sluice").toContain(luaProtocol());
    // The generated constants are the table's, and the script uses them, not bare numbers.
    expect(luaProtocol()).toContain("local OP_DECIDE, OP_PEEK, OP_ADJUST");
    expect(text).not.toMatch(/\bop (==|>=|<=|>) [0-9]/);
    expect(text).not.toMatch(/% 8\b/);
  });

  it("the protocol's tables hold every code the TypeScript sends", () => {
    expect(OPERATION_CODES.map((op) => op.code)).toEqual([...Array(OPS_PER_SPEC).keys()]);
    expect(OP_GIVE_BACK).toBe(OPS_PER_SPEC - 1);
    const scriptCodes = SCRIPT_ALGORITHM_CODES.map((a) => a.code);
    for (const code of [...Object.values(ALGORITHM_CODES), "i", "F"])
      expect(scriptCodes).toContain(code);
  });
});
