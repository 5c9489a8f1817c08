/**
 * Options objects that know their own keys. Every constructor and wrapper of this package checks the
 * keys of the object it is given, so that a typo (`namspace`), an option of another store
 * (`new RedisStore({ client, cluster: true })`) or one from a newer version is an `InvalidOptionError`
 * naming the key — not a store that silently runs with its defaults.
 *
 * `optionKeys<T>()` makes the list from an object with one entry per key of `T`: the compiler rejects
 * a list that misses a key of the options interface or names one it does not have, so the runtime
 * check cannot drift from the type.
 *
 * What this is *not*: validation of the values. Each option's value is checked where it is used.
 */
import { InvalidOptionError } from "../errors.js";

/** The known keys of an options type, as a set. */
export type OptionKeys<T> = ReadonlySet<keyof T & string>;

/** The keys of `T`, from an object naming each of them exactly once (checked by the compiler). */
export function optionKeys<T extends object>(keys: { readonly [K in keyof Required<T>]: true }): OptionKeys<T> {
  return new Set(Object.keys(keys) as (keyof T & string)[]);
}

/** The known keys of two option types together (a handler's own and the engine's). */
export function unionKeys<A, B>(a: OptionKeys<A>, b: OptionKeys<B>): OptionKeys<A & B> {
  return new Set<string>([...a, ...b]) as unknown as OptionKeys<A & B>;
}

/** Edit distance of two short strings, to suggest the option a typo meant. */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    let diagonal = row[0] as number;
    row[0] = i;
    for (let j = 1; j <= b.length; j += 1) {
      const above = row[j] as number;
      row[j] = Math.min(above + 1, (row[j - 1] as number) + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length] as number;
}

function suggestion(key: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const d = candidate.toLowerCase() === key.toLowerCase() ? 0 : distance(key, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best !== undefined && bestDistance <= Math.max(1, Math.floor(key.length / 4)) ? best : undefined;
}

/**
 * Checks that `options` (an object, or undefined for "none") names only `known` keys. Throws
 * `InvalidOptionError` naming the first unknown key, with the option it probably meant.
 */
export function checkOptions<T>(options: T | undefined, known: OptionKeys<T>, owner: string): void {
  if (options === undefined) return;
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new InvalidOptionError("options", `of ${owner} must be an object`);
  }
  for (const key of Object.keys(options)) {
    if (known.has(key as keyof T & string)) continue;
    const meant = suggestion(key, known);
    throw new InvalidOptionError(
      key,
      meant === undefined
        ? `is not an option of ${owner} (its options: ${[...known].sort().join(", ")})`
        : `is not an option of ${owner} (did you mean "${meant}"?)`,
    );
  }
}
