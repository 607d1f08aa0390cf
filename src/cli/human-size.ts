/** How the CLI prints a byte count for people: `177 B`, `12.3 KiB`, `64 MiB` (binary units, one decimal at most). */

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function humanSize(bytes: number): string {
  let value = bytes;
  let unit = 0;
  // Compared after rounding, so 1023.96 KiB reads `1 MiB`, not `1024 KiB`.
  while (Math.round(value * 10) / 10 >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} B` : `${Math.round(value * 10) / 10} ${units[unit]}`;
}
