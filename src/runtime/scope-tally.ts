/**
 * How many of something each scope has under way in this process (admissions being made, imports running): a quota
 * check reads it and takes a place with no await between, so concurrent calls of a scope see each other.
 */
export class ScopeTally {
  private readonly counts = new Map<string, number>();

  of(scope: string): number {
    return this.counts.get(scope) ?? 0;
  }

  take(scope: string): void {
    this.counts.set(scope, this.of(scope) + 1);
  }

  give(scope: string): void {
    const left = this.of(scope) - 1;
    if (left > 0) this.counts.set(scope, left);
    else this.counts.delete(scope);
  }
}
