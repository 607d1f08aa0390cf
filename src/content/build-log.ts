/**
 * A build's log, bounded: the installers' own output, with the start kept whole and, past the bound, only the most
 * recent output (where failures are) after a marker saying how much was left out.
 */
export class BuildLog {
  private head = '';
  private tail: string[] = [];
  private tailLength = 0;
  private omitted = 0;

  constructor(
    private readonly maxChars = 1024 * 1024,
    private readonly onText?: (text: string) => void,
  ) {}

  append(text: string): void {
    this.onText?.(text);
    const headRoom = Math.floor(this.maxChars / 4) - this.head.length;
    if (headRoom > 0) {
      this.head += text.slice(0, headRoom);
      text = text.slice(headRoom);
    }
    if (!text) return;
    this.tail.push(text);
    this.tailLength += text.length;
    const tailMax = this.maxChars - Math.floor(this.maxChars / 4);
    while (this.tailLength > tailMax) {
      const first = this.tail[0];
      const drop = Math.min(first.length, this.tailLength - tailMax);
      this.omitted += drop;
      this.tailLength -= drop;
      if (drop === first.length) this.tail.shift();
      else this.tail[0] = first.slice(drop);
    }
  }

  toString(): string {
    const marker = this.omitted ? `\n[… ${this.omitted} characters of output left out …]\n` : '';
    return this.head + marker + this.tail.join('');
  }
}
