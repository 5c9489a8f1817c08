/**
 * Copies of one id in one batch step: a store decides each key once (one statement may not touch a
 * row twice; one conditional write per item), and the later copies of a key share its answer — a
 * copy of a key its first copy just claimed answers `in-flight` for the lease (the first copy holds
 * it), a copy of a `done` or `in-flight` key the same answer.
 *
 * What this is *not*: the engine's in-batch copies (the engine already sends each key once); this is
 * for a store called directly with repeated ids.
 */
import type { Claim } from "../contract.js";

/** Each key's answer, in the order of `keys`; later copies of a claimed key answer in flight for `leaseMs`. */
export function answerPerKey(keys: readonly string[], answers: ReadonlyMap<string, Claim>, leaseMs: number): Claim[] {
  const answered = new Set<string>();
  return keys.map((key): Claim => {
    const answer = answers.get(key) as Claim;
    if (answered.has(key) && answer.status === "claimed") return { status: "in-flight", retryAfterMs: leaseMs };
    answered.add(key);
    return answer;
  });
}
