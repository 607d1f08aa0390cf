/**
 * The import caps, checked as bytes and members go by (never after the fact): member count, total uncompressed bytes,
 * and the expansion ratio of compressed input. A passed cap throws at once, which stops the reading.
 */
import { BerthError } from '../../../schemas/errors.ts';
import type { ContentLimits } from '../content-limits.ts';

export type BombReason = 'too_many_entries' | 'too_large' | 'compression_ratio';

export class ImportMeter {
  entries = 0;
  declaredBytes = 0;
  compressedBytes = 0;
  expandedBytes = 0;

  constructor(private readonly limits: ContentLimits) {}

  /** One more member (dropped ones too: they cost reading). */
  entry(): void {
    if (++this.entries > this.limits.maxEntries) {
      throw refuse('too_many_entries', `The archive has more than ${this.limits.maxEntries} members.`, this.limits.maxEntries);
    }
  }

  /** A member's declared size, counted before its bytes are read. */
  declare(size: number): void {
    this.declaredBytes += size;
    if (this.declaredBytes > this.limits.maxTotalBytes) {
      throw refuse('too_large', `The archive holds more than ${this.limits.maxTotalBytes} bytes.`, this.limits.maxTotalBytes);
    }
  }

  compressed(n: number): void {
    this.compressedBytes += n;
  }

  /** A compressed archive being spooled before it can be read (a zip): it cannot expand to less than itself. */
  spooled(total: number): void {
    if (total > this.limits.maxTotalBytes) {
      throw refuse('too_large', `The archive is larger than ${this.limits.maxTotalBytes} bytes.`, this.limits.maxTotalBytes);
    }
  }

  /** Bytes that came out of a decompressor. */
  expanded(n: number): void {
    this.expandedBytes += n;
    if (this.expandedBytes > this.limits.maxTotalBytes) {
      throw refuse('too_large', `The archive expands to more than ${this.limits.maxTotalBytes} bytes.`, this.limits.maxTotalBytes);
    }
    if (
      this.expandedBytes > this.limits.ratioFloorBytes &&
      this.expandedBytes > this.limits.maxCompressionRatio * Math.max(1, this.compressedBytes)
    ) {
      throw refuse(
        'compression_ratio',
        `The archive expands more than ${this.limits.maxCompressionRatio} times its compressed size.`,
        this.limits.maxCompressionRatio,
      );
    }
  }
}

function refuse(reason: BombReason, message: string, limit: number): BerthError {
  return new BerthError('environment_invalid', message, { reason, limit });
}
