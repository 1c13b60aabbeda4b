/**
 * Reading stored values back: JSON columns.
 */

/** Parses a JSON column. */
export function parseJson<T>(text: string, what: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new Error(`corrupt ${what} in the database: ${(err as Error).message}`, { cause: err });
  }
}
