/** Rows under a header for the listing commands (`berth ps`, `berth env ls`), each column as wide as its widest cell. */
import { writeLine } from './stdout-lines.ts';

export async function table(header: string[], rows: string[][]): Promise<void> {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  for (const row of [header, ...rows]) await writeLine(row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd());
}
