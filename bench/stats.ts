/** BENCH — small statistics helpers. Medians, because the machine is noisy and means are not. */

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** The kits in a different order each round, so none always goes first (warm caches, GC debt). */
export function rotate<T>(items: readonly T[], round: number): T[] {
  const shift = round % Math.max(1, items.length);
  return [...items.slice(shift), ...items.slice(0, shift)];
}

/** The `q` quantile by nearest rank (the value at ⌊q·n⌋ of the sorted values, the last for q = 1); 0 for no values. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}
