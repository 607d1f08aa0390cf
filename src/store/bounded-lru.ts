/**
 * A cache of what was read from the store, least recently used first out, bounded in entries and in bytes (each
 * entry's weight as its owner measures it): entries may be as large as what a member put in them (an execution's
 * command, up to the 1 MiB request body), so a count alone could keep gigabytes. The newest entry always stays. Used
 * by the actor cache and the read models' tables.
 */
export class BoundedLru<V> {
  private readonly entries = new Map<string, { value: V; bytes: number }>();
  private total = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
  ) {}

  /** The value, now the most recently used. */
  get(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    this.entries.delete(key);
    this.entries.set(key, hit);
    return hit.value;
  }

  /** The weight a cached value was given, without using it. */
  weightOf(key: string): number | undefined {
    return this.entries.get(key)?.bytes;
  }

  set(key: string, value: V, bytes: number): void {
    this.delete(key);
    this.entries.set(key, { value, bytes });
    this.total += bytes;
    while (this.entries.size > 1 && (this.entries.size > this.maxEntries || this.total > this.maxBytes)) {
      this.delete(this.entries.keys().next().value as string);
    }
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.total -= entry.bytes;
  }

  /** The sum of the weights held now. */
  get bytes(): number {
    return this.total;
  }
}
