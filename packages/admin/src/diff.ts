/**
 * A readable diff of two JSON values (policy documents, audit details): one line per field
 * that differs, with its dotted path and both sides — `rules.0.limit: 5 → 8`,
 * `apps: + billing`, `blockDuration: (none) → "5m"`. Lists of names compare as sets (added and
 * removed names); other lists, item by item.
 */

/** One difference. */
export interface Change {
  /** Dotted path of the field (`rules.0.limit`); empty for the whole value. */
  readonly path: string;
  /** `changed`, `added` (no before) or `removed` (no after). */
  readonly kind: "changed" | "added" | "removed";
  /** The value before, as short text (absent when added). */
  readonly before?: string;
  /** The value after, as short text (absent when removed). */
  readonly after?: string;
}

type Json = unknown;

const isObject = (v: Json): v is Record<string, Json> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const isNameList = (v: Json): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === "string");

/** A value as short text: strings quoted, objects and lists compact. */
export function show(v: Json): string {
  if (v === undefined) return "(none)";
  if (typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(show).join(", ")}]`;
  if (isObject(v))
    return `{ ${Object.entries(v)
      .map(([k, x]) => `${k}: ${show(x)}`)
      .join(", ")} }`;
  return String(v);
}

/** The differences from `before` to `after`, in the order of their fields. */
export function diff(before: Json, after: Json, path = ""): Change[] {
  const at = (k: string | number) => (path ? `${path}.${k}` : String(k));
  if (before === undefined && after === undefined) return [];
  if (before === undefined) return [{ path, kind: "added", after: show(after) }];
  if (after === undefined) return [{ path, kind: "removed", before: show(before) }];
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    return keys.flatMap((k) => diff(before[k], after[k], at(k)));
  }
  if (isNameList(before) && isNameList(after)) {
    const gone = before.filter((x) => !after.includes(x));
    const added = after.filter((x) => !before.includes(x));
    if (gone.length === 0 && added.length === 0) return [];
    return [
      {
        path,
        kind: "changed",
        before: show(before),
        after: [...added.map((x) => `+ ${x}`), ...gone.map((x) => `− ${x}`)].join(", "),
      },
    ];
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const n = Math.max(before.length, after.length);
    const out: Change[] = [];
    for (let i = 0; i < n; i++) out.push(...diff(before[i], after[i], at(i)));
    return out;
  }
  if (show(before) === show(after)) return [];
  return [{ path, kind: "changed", before: show(before), after: show(after) }];
}
