/**
 * A heavy-hitter sketch: Space-Saving (Metwally, Agrawal and El Abbadi, 2005). It watches at
 * most `capacity` keys of a stream, so its memory is bounded whatever the number of distinct
 * keys, and it finds every key seen more than `total / capacity` times.
 *
 * How it works: a key already watched has its count raised. A new key takes a free slot, or —
 * when all are taken — the slot of the key with the smallest count `m`, starting from `m` (it
 * may have been seen up to `m` times before, unwatched). So each count is an **upper bound** of
 * the key's true count, too high by at most its `overcount`; and any key not watched was seen at
 * most {@link SpaceSaving.floor} times. While a stream has no more distinct keys than the
 * sketch has slots, nothing is evicted and every count is exact.
 *
 * Slots are numbered (0 to `capacity − 1`) and a newcomer takes the number of the key it
 * evicts, so a copy kept by slot number (the `traffic_keys` rows, one per slot) holds exactly
 * the sketch's keys: never more than `capacity`, never a key that was evicted.
 *
 * Summaries of several streams (nodes, minutes) merge with {@link mergeSummaries}: counts add,
 * and a key missing from one summary is counted at that summary's floor, so the bounds still
 * hold (Agarwal et al., "Mergeable summaries", 2012).
 */

/** One watched key: its count (an upper bound) and how much of it may be over. */
export interface HeavyHitter {
  readonly key: string;
  /** Upper bound of the times the key was seen. */
  readonly count: number;
  /** At most this much of `count` is over the truth: the key was seen ≥ `count − overcount` times. */
  readonly overcount: number;
}

/** A sketch's state as others read it: its watched keys and its floor. */
export interface Summary {
  readonly entries: readonly HeavyHitter[];
  /** Upper bound of the count of any key not in `entries` (0 while the sketch had free slots). */
  readonly floor: number;
}

/** A watched key's place in the sketch, as {@link SpaceSaving.takeDirty} reports it. */
export interface SlotEntry extends HeavyHitter {
  /** Its slot's number, 0 to `capacity − 1`: the key it replaced had the same. */
  readonly slot: number;
}

interface Slot {
  count: number;
  overcount: number;
  readonly index: number;
}

/** The Space-Saving sketch of one stream; see the module comment. */
export class SpaceSaving {
  private readonly slots = new Map<string, Slot>();
  private readonly dirty = new Set<string>();
  /** The smallest count, and how many slots hold it (0: not known, scan again). */
  private minCount = 0;
  private atMin = 0;

  /** @param capacity - the most keys watched (its memory bound). */
  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`capacity must be a positive integer (got ${capacity})`);
  }

  /** Keys watched. */
  get size(): number {
    return this.slots.size;
  }

  /** Upper bound of the count of any key not watched: the smallest count once every slot is taken. */
  get floor(): number {
    if (this.slots.size < this.capacity) return 0;
    this.knowMin();
    return this.minCount;
  }

  /**
   * Counts `weight` (a positive integer) occurrences of `key`. Amortized O(1): the smallest
   * count is tracked with how many slots hold it, and found again by a scan only once every
   * slot has left it (once per `capacity` evictions when new keys keep coming).
   */
  offer(key: string, weight = 1): void {
    const slot = this.slots.get(key);
    if (slot) {
      if (this.atMin > 0 && slot.count === this.minCount) this.atMin--;
      slot.count += weight;
    } else if (this.slots.size < this.capacity) {
      this.slots.set(key, { count: weight, overcount: 0, index: this.slots.size });
      this.atMin = 0; // a new smallest count, maybe
    } else {
      // Evict a key with the smallest count; the newcomer inherits it as its possible overcount.
      this.knowMin();
      const min = this.minCount;
      // Map order is insertion order: the oldest slots, which hold the smallest counts most
      // often (newcomers start above the minimum), come first.
      let index = -1;
      for (const [k, s] of this.slots) {
        if (s.count === min) {
          index = s.index;
          this.slots.delete(k);
          this.dirty.delete(k);
          break;
        }
      }
      this.atMin--;
      this.slots.set(key, { count: min + weight, overcount: min, index });
    }
    this.dirty.add(key);
  }

  /** Makes `minCount` and `atMin` true (a scan, when no slot is known to hold the minimum). */
  private knowMin(): void {
    if (this.atMin > 0) return;
    let min = Infinity;
    let n = 0;
    for (const s of this.slots.values()) {
      if (s.count < min) {
        min = s.count;
        n = 1;
      } else if (s.count === min) n++;
    }
    this.minCount = min === Infinity ? 0 : min;
    this.atMin = n;
  }

  /** The `n` keys with the largest counts, largest first (ties by key). */
  top(n = this.capacity): HeavyHitter[] {
    return sortHitters(
      [...this.slots].map(([key, s]) => ({ key, count: s.count, overcount: s.overcount })),
    ).slice(0, n);
  }

  /** The summary: every watched key and the floor. */
  summary(): Summary {
    return { entries: this.top(), floor: this.floor };
  }

  /**
   * The watched keys whose count changed since the last call, with their slots. An evicted key
   * is left out: its slot is reported with the key that took it. Each is reported once.
   */
  takeDirty(): SlotEntry[] {
    const out: SlotEntry[] = [];
    for (const key of this.dirty) {
      const s = this.slots.get(key);
      if (s) out.push({ key, count: s.count, overcount: s.overcount, slot: s.index });
    }
    this.dirty.clear();
    return out;
  }

  /** Marks keys as changed again (their report could not be delivered). */
  markDirty(keys: Iterable<string>): void {
    for (const k of keys) if (this.slots.has(k)) this.dirty.add(k);
  }
}

/** Largest count first; ties by the larger lower bound, then by key (a stable order). */
function sortHitters(list: HeavyHitter[]): HeavyHitter[] {
  return list.sort(
    (a, b) =>
      b.count - a.count ||
      b.count - b.overcount - (a.count - a.overcount) ||
      (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
  );
}

/**
 * Merges summaries of disjoint streams (one per node and minute, say) into one of at most
 * `capacity` keys. A key's count is the sum of its counts, where a summary that does not hold it
 * contributes its floor (to the count and to the overcount alike), so every count stays an upper
 * bound and `count − overcount` a lower bound. The result's floor bounds every key left out.
 */
export function mergeSummaries(summaries: readonly Summary[], capacity: number): Summary {
  const totalFloor = summaries.reduce((t, s) => t + s.floor, 0);
  const merged = new Map<string, { count: number; overcount: number }>();
  for (const s of summaries) {
    for (const e of s.entries) {
      const m = merged.get(e.key) ?? { count: totalFloor, overcount: totalFloor };
      // Replace this summary's floor (counted above for every key) with the key's own entry.
      m.count += e.count - s.floor;
      m.overcount += e.overcount - s.floor;
      merged.set(e.key, m);
    }
  }
  const all = sortHitters([...merged].map(([key, m]) => ({ key, ...m })));
  const kept = all.slice(0, capacity);
  const firstLeftOut = all[capacity]?.count ?? 0;
  return { entries: kept, floor: Math.max(totalFloor, firstLeftOut) };
}
