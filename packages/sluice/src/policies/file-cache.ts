/**
 * The policy client's cache in a file (Node only: `node:fs` is loaded when the cache is first
 * used, so the main entry runs where there is no file system as long as no file cache is asked
 * for).
 */
import { importBuiltin } from "../platform.js";

/**
 * Where a policy client keeps the last policy set it received, to start from when the service
 * cannot be reached. `load` resolves to the text last saved (undefined when there is none);
 * `save` replaces it. Both may reject; the client reports that and carries on.
 */
export interface PolicyCache {
  /** The text last saved, or undefined when nothing was saved yet. */
  load(): Promise<string | undefined>;
  /** Replaces the saved text. */
  save(text: string): Promise<void>;
}

interface Fs {
  readFile(path: string, encoding: "utf8"): Promise<string>;
  writeFile(path: string, data: string, options: { mode: number }): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  rm(path: string, options: { force: boolean }): Promise<void>;
  mkdir(path: string, options: { recursive: true; mode: number }): Promise<unknown>;
}

let fsModule: Promise<Fs> | undefined;
const fs = (): Promise<Fs> => (fsModule ??= importBuiltin<Fs>("fs/promises"));

/**
 * A {@link PolicyCache} in a file (Node). Each save writes a temporary file beside it and
 * renames it over the old one, so a crash mid-write never leaves half a file. The file holds
 * the policy documents (no API key, only its public id) and is written with mode 0600; a
 * missing directory is created (mode 0700) on the first save.
 */
export function fileCache(path: string): PolicyCache {
  return {
    async load() {
      const f = await fs();
      try {
        return await f.readFile(path, "utf8");
      } catch (err) {
        if ((err as { code?: unknown }).code === "ENOENT") return undefined;
        throw err;
      }
    },
    async save(text) {
      const f = await fs();
      const tmp = `${path}.${Math.random().toString(36).slice(2)}.tmp`;
      const dir = path.replace(/[\\/][^\\/]*$/, "");
      if (dir !== "" && dir !== path) await f.mkdir(dir, { recursive: true, mode: 0o700 });
      try {
        await f.writeFile(tmp, text, { mode: 0o600 });
        await f.rename(tmp, path);
      } catch (err) {
        await f.rm(tmp, { force: true }).catch(() => undefined);
        throw err;
      }
    },
  };
}
