/**
 * The random operation sequences the compat suites play against a peer and its face, as
 * fast-check arbitraries: {@link op} is one kind of operation and how often it is drawn, for
 * `fc.oneof`; {@link wait} is time passing.
 */
import fc from "fast-check";

/**
 * The operation `{ op: name, ...fields }` drawn with `weight` (for `fc.oneof`), each field from
 * its arbitrary.
 */
export function op<N extends string, R extends object>(
  weight: number,
  name: N,
  fields: { [K in keyof R]: fc.Arbitrary<R[K]> },
): fc.WeightedArbitrary<{ op: N } & R> {
  const record = fc.record({ op: fc.constant(name), ...fields } as {
    [K in keyof ({ op: N } & R)]: fc.Arbitrary<({ op: N } & R)[K]>;
  });
  return { weight, arbitrary: record };
}

/** `{ op: "wait", ms }`: from 1 to `maxMs` ms passing, drawn with `weight`. */
export function wait(weight: number, maxMs: number) {
  return op(weight, "wait", { ms: fc.integer({ min: 1, max: maxMs }) });
}
