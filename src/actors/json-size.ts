/**
 * About how many characters a plain value's JSON takes (escapes aside), counted only as far as needed: `most` is
 * answered once the count reaches it, and past `maxNodes` values waiting to be looked at the rest is left uncounted
 * (what was counted is answered). A bounded look at a value that may be large: a replay step's context value, an
 * actor cache entry's context.
 */
export function jsonSizeAtMost(value: unknown, most: number, maxNodes = Infinity): number {
  let size = 0;
  const pending: unknown[] = [value];
  for (let nodes = 0; pending.length > 0 && nodes < maxNodes; nodes++) {
    const v = pending.pop();
    if (typeof v === 'string') size += v.length + 2;
    else if (v === null || typeof v !== 'object') size += String(v).length;
    else if (Array.isArray(v)) {
      size += 2;
      for (const item of v) {
        if (++size >= most || pending.length >= maxNodes) break;
        pending.push(item);
      }
    } else {
      size += 2;
      for (const key in v) {
        size += key.length + 4;
        if (size >= most || pending.length >= maxNodes) break;
        pending.push((v as Record<string, unknown>)[key]);
      }
    }
    if (size >= most) return most;
  }
  return size;
}
