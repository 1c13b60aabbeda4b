/**
 * The "flat load" of issue 32, with its true counts: 30% of the decisions on one key and the
 * rest spread evenly over 300 keys (14–18 decisions each), shuffled and cut into `parts` runs
 * (minutes × nodes, say). The true top ten is unambiguous: the hot key, then the nine tail keys
 * at 18 (every other tail key has at most 17). A seeded shuffle: the same load on every run.
 */

/** One flat load: the decisions in order, and what each key really got. */
export interface FlatLoad {
  /** The hot key. */
  readonly hot: string;
  /** Each key's true number of decisions. */
  readonly truth: ReadonlyMap<string, number>;
  /** The keys of the decisions, in order, cut into `parts` runs of (nearly) equal length. */
  readonly parts: readonly (readonly string[])[];
  /** The true ranking: most first, ties by key (as the service sorts them). */
  readonly ranked: readonly { readonly key: string; readonly count: number }[];
}

/** A small seeded generator (mulberry32): numbers in [0, 1). */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** The flat load cut into `parts` runs; see the module comment. */
export function flatLoad(parts: number, seed = 32): FlatLoad {
  const hot = "hot";
  const truth = new Map<string, number>();
  // Nine tail keys at 18, the other 291 at 14, 15, 16 or 17 in turn.
  for (let i = 0; i < 300; i++)
    truth.set(`k${String(i).padStart(3, "0")}`, i < 9 ? 18 : 14 + (i % 4));
  const tail = [...truth.values()].reduce((a, b) => a + b, 0);
  truth.set(hot, Math.round((tail * 3) / 7)); // 30% of the whole
  const stream: string[] = [];
  for (const [key, n] of truth) for (let i = 0; i < n; i++) stream.push(key);
  const next = random(seed);
  for (let i = stream.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [stream[i], stream[j]] = [stream[j]!, stream[i]!];
  }
  const cut: string[][] = [];
  for (let p = 0; p < parts; p++)
    cut.push(
      stream.slice(
        Math.round((p * stream.length) / parts),
        Math.round(((p + 1) * stream.length) / parts),
      ),
    );
  const ranked = [...truth]
    .map(([key, count]) => ({ key, count }))
    .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1));
  return { hot, truth, parts: cut, ranked };
}
