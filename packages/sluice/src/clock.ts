/** A source of time in integer milliseconds since the epoch. */
export type Clock = () => number;

/** The system clock. The only place in sluice that reads it. */
export const systemClock: Clock = () => Date.now();
