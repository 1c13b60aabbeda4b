import { createHash } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as embedded from "./lua-scripts.js";

const dir = fileURLToPath(new URL("./lua/", import.meta.url));

// Pinned: a change to a script must be deliberate (update the hash here and re-run
// `npm run embed-lua -w sluice`). Redis caches scripts by this SHA1.
const PINNED: Record<string, string> = {
  "sluice.lua": "0b9201c88295ac021a2bacf3853a452e9a544c2e",
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
});
