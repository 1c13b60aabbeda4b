/**
 * Calendar windows: the edges of a day, an ISO week, a month or a year as they fall in an IANA
 * time zone — local midnights, so a day of 23 or 25 hours (a DST change) is one window, and a
 * midnight a DST change skips starts the day at the first instant that has its date.
 *
 * A rule with `calendar` (policy.ts) counts as a fixed window whose edges these are; the window
 * arithmetic is here, in TypeScript, once: the memory store and the Durable Object decide with
 * it, and the Redis script is handed the window's edges (lua/sluice.lua).
 *
 * Time-zone arithmetic uses `Intl.DateTimeFormat`, which every runtime sluice supports carries
 * with its time-zone data. It runs when a decision crosses into another window: a rule keeps the
 * window it answered last and reuses it while `now` is inside it.
 */

/** The calendar units a rule may count by. */
export const CALENDARS = ["day", "week", "month", "year"] as const;

/** A calendar unit: `day`, `week` (ISO, from an anchor weekday), `month` or `year`. */
export type CalendarUnit = (typeof CALENDARS)[number];

/**
 * A calendar rule's window, resolved: the unit, the zone and the anchor, and the edges of the
 * window holding an instant.
 */
export interface CalendarWindow {
  /** The unit the windows follow. */
  readonly calendar: CalendarUnit;
  /** The IANA time zone whose local midnights are the edges, as written (e.g. `"Europe/Berlin"`). */
  readonly timeZone: string;
  /**
   * Where a window starts: for `week` the ISO weekday (1 = Monday … 7 = Sunday), for `month`
   * the day of the month (1–31, a shorter month's last day when it has no such day), for `year`
   * `"MM-DD"` (Feb 29 is Feb 28 in other years); 0 for `day`.
   */
  readonly anchor: number | string;
  /** The start (epoch ms, inclusive) of the window holding `nowMs`. */
  startAt(nowMs: number): number;
  /** The end (epoch ms, exclusive) of the window holding `nowMs`: the next window's start. */
  endAt(nowMs: number): number;
}

const DAY_MS = 86_400_000;

/**
 * The longest window of each unit, the rule's nominal `periodMs` (what `RateLimit-Policy`'s
 * `w` and a decision's `periodMs` say); a window's true edges are in `resetAfterMs`.
 */
export const CALENDAR_PERIOD_MS: Readonly<Record<CalendarUnit, number>> = {
  day: DAY_MS,
  week: 7 * DAY_MS,
  month: 31 * DAY_MS,
  year: 366 * DAY_MS,
};

/** One formatter per zone: making one costs far more than using it. */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (f === undefined) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
      era: "short",
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/**
 * Whether `timeZone` is an IANA zone this runtime knows; the message when it is not. (Offsets
 * such as `+02:00` are refused too: a fixed offset has no calendar of its own to follow.)
 */
export function timeZoneProblem(timeZone: unknown): string | undefined {
  if (typeof timeZone !== "string" || timeZone === "")
    return "timeZone must be an IANA time zone name such as Europe/Berlin";
  if (/^[+-]/.test(timeZone))
    return `timeZone must be an IANA time zone name, not an offset (got ${JSON.stringify(timeZone)})`;
  try {
    formatter(timeZone);
    return undefined;
  } catch {
    return `timeZone ${JSON.stringify(timeZone)} is not a time zone this runtime knows (an IANA name such as Europe/Berlin)`;
  }
}

/** A local date: year, month 1–12, day 1–31. */
interface LocalDate {
  y: number;
  m: number;
  d: number;
}

/** The local wall time of instant `t` in the zone, as if it were UTC (ms), and its date. */
function wallOf(t: number, timeZone: string): { wall: number; date: LocalDate } {
  const seconds = Math.floor(t / 1000) * 1000;
  let y = 0;
  let m = 0;
  let d = 0;
  let h = 0;
  let mi = 0;
  let s = 0;
  let bc = false;
  for (const p of formatter(timeZone).formatToParts(seconds)) {
    switch (p.type) {
      case "year":
        y = Number(p.value);
        break;
      case "month":
        m = Number(p.value);
        break;
      case "day":
        d = Number(p.value);
        break;
      case "hour":
        h = Number(p.value);
        break;
      case "minute":
        mi = Number(p.value);
        break;
      case "second":
        s = Number(p.value);
        break;
      case "era":
        bc = p.value === "BC" || p.value === "B";
        break;
    }
  }
  if (bc) y = 1 - y;
  const wall = utc(y, m, d) + h * 3_600_000 + mi * 60_000 + s * 1000 + (t - seconds);
  return { wall, date: { y, m, d } };
}

/** `Date.UTC` for a local date (any day or month count normalises, as Date does). */
function utc(y: number, m: number, d: number): number {
  const t = Date.UTC(y, m - 1, d);
  // Date.UTC maps years 0–99 to 1900–1999.
  return y >= 0 && y < 100 ? new Date(t).setUTCFullYear(y) : t;
}

/** The date `days` after `date`. */
function addDays(date: LocalDate, days: number): LocalDate {
  const t = new Date(utc(date.y, date.m, date.d + days));
  return { y: t.getUTCFullYear(), m: t.getUTCMonth() + 1, d: t.getUTCDate() };
}

function daysInMonth(y: number, m: number): number {
  return new Date(utc(y, m + 1, 0)).getUTCDate();
}

/** The zone's offset from UTC (ms) at instant `t`. */
function offsetAt(t: number, timeZone: string): number {
  return wallOf(t, timeZone).wall - t;
}

/**
 * The first instant whose local date in the zone is `date`: its local midnight, or — when a DST
 * change skips midnight — the instant the change happens.
 */
export function startOfDay(date: LocalDate, timeZone: string): number {
  const wall = utc(date.y, date.m, date.d);
  // The offsets in force a day either side: a zone changes its offset at most once in a day.
  const before = offsetAt(wall - DAY_MS, timeZone);
  const after = offsetAt(wall + DAY_MS, timeZone);
  let best = Infinity;
  for (const o of before === after ? [before] : [before, after]) {
    const t = wall - o;
    if (offsetAt(t, timeZone) === o && t < best) best = t;
  }
  if (best !== Infinity) return best;
  // Midnight does not exist: the day starts at the change, between the instant that would be
  // midnight under the new offset (still the old one then) and under the old (the new one by
  // then). Whole milliseconds, by halving.
  let lo = wall - after;
  let hi = wall - before;
  if (lo > hi) [lo, hi] = [hi, lo];
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (offsetAt(mid, timeZone) === before) lo = mid;
    else hi = mid;
  }
  return hi;
}

/** The local date of instant `t` in the zone. */
export function localDate(t: number, timeZone: string): LocalDate {
  return wallOf(t, timeZone).date;
}

/** The first local date of the window holding `date`, and the first of the next. */
function windowDates(
  unit: CalendarUnit,
  anchor: number | string,
  date: LocalDate,
): [LocalDate, LocalDate] {
  switch (unit) {
    case "day":
      return [date, addDays(date, 1)];
    case "week": {
      const iso = new Date(utc(date.y, date.m, date.d)).getUTCDay() || 7;
      const first = addDays(date, -((iso - (anchor as number) + 7) % 7));
      return [first, addDays(first, 7)];
    }
    case "month": {
      const a = anchor as number;
      const on = (y: number, m: number): LocalDate => {
        const t = new Date(utc(y, m, 1));
        const yy = t.getUTCFullYear();
        const mm = t.getUTCMonth() + 1;
        return { y: yy, m: mm, d: Math.min(a, daysInMonth(yy, mm)) };
      };
      const here = on(date.y, date.m);
      const first = date.d >= here.d ? here : on(date.y, date.m - 1);
      return [first, on(first.y, first.m + 1)];
    }
    case "year": {
      const [mm, dd] = (anchor as string).split("-").map(Number) as [number, number];
      const on = (y: number): LocalDate => ({ y, m: mm, d: Math.min(dd, daysInMonth(y, mm)) });
      const here = on(date.y);
      const first =
        date.m > here.m || (date.m === here.m && date.d >= here.d) ? here : on(date.y - 1);
      return [first, on(first.y + 1)];
    }
  }
}

/**
 * The windows of one calendar rule. Keeps the last window it computed: a decision inside it
 * reads two numbers, and only one that crosses an edge does time-zone arithmetic.
 */
export class CalendarWindows implements CalendarWindow {
  private start = 0;
  private end = 0;

  constructor(
    readonly calendar: CalendarUnit,
    readonly timeZone: string,
    readonly anchor: number | string,
  ) {}

  startAt(nowMs: number): number {
    if (!(nowMs >= this.start && nowMs < this.end)) this.move(nowMs);
    return this.start;
  }

  endAt(nowMs: number): number {
    if (!(nowMs >= this.start && nowMs < this.end)) this.move(nowMs);
    return this.end;
  }

  private move(nowMs: number): void {
    const [first, next] = windowDates(this.calendar, this.anchor, localDate(nowMs, this.timeZone));
    let start = startOfDay(first, this.timeZone);
    let end = startOfDay(next, this.timeZone);
    // An instant before its date's first instant cannot be, but guard the edges all the same:
    // the window must hold nowMs.
    if (nowMs < start) end = start;
    if (nowMs >= end) start = end;
    this.start = start;
    this.end = Math.max(end, start + 1);
  }
}

/** The default anchor of each unit. */
export function defaultAnchor(unit: CalendarUnit): number | string {
  return unit === "year" ? "01-01" : unit === "day" ? 0 : 1;
}

/**
 * Why `anchor` is not an anchor of `unit`, or undefined when it is. A week's is an ISO weekday
 * 1–7, a month's a day 1–31, a year's `"MM-DD"` (a date that exists in a leap year); a day has
 * none.
 */
export function anchorProblem(unit: CalendarUnit, anchor: unknown): string | undefined {
  switch (unit) {
    case "day":
      return "anchor does not apply to a day (its windows start at local midnight)";
    case "week":
      return Number.isInteger(anchor) && (anchor as number) >= 1 && (anchor as number) <= 7
        ? undefined
        : `anchor of a week must be an ISO weekday 1 (Monday) to 7 (Sunday) (got ${show(anchor)})`;
    case "month":
      return Number.isInteger(anchor) && (anchor as number) >= 1 && (anchor as number) <= 31
        ? undefined
        : `anchor of a month must be a day of the month 1 to 31 (got ${show(anchor)})`;
    case "year": {
      const m = typeof anchor === "string" ? /^(\d\d)-(\d\d)$/.exec(anchor) : null;
      const mm = m ? Number(m[1]) : 0;
      const dd = m ? Number(m[2]) : 0;
      return m && mm >= 1 && mm <= 12 && dd >= 1 && dd <= daysInMonth(2000, mm)
        ? undefined
        : `anchor of a year must be a date "MM-DD" such as "04-01" (got ${show(anchor)})`;
    }
  }
}

function show(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v) : v === undefined ? "nothing" : String(v);
}
