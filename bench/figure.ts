/**
 * What every benchmark ends with (DESIGN §12): one JSON line per figure, its raw baseline from the same run, and
 * the ratio checked against the target. Also the median the figures are taken from.
 */
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Prints the figure line; `target` bounds value / baseline. */
export function figure(bench: string, value: number, unit: string, baseline: number, target: { op: '<=' | '>='; ratio: number }): void {
  const ratio = value / baseline;
  console.log(
    JSON.stringify({
      bench,
      value: Number(value.toFixed(2)),
      unit,
      baseline: Number(baseline.toFixed(2)),
      ratio: Number(ratio.toFixed(3)),
      target: `${target.op} ${target.ratio}`,
      met: target.op === '<=' ? ratio <= target.ratio : ratio >= target.ratio,
    }),
  );
}
