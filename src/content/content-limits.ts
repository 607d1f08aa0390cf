/**
 * Limits on environment content, with their defaults. Import caps are checked while the archive streams, so a bomb is
 * refused after reading little more than the cap: the ratio rule alone stops a zero-filled 1 GiB tar.gz once its
 * first 10 MiB have expanded from a few kilobytes.
 */
export interface ContentLimits {
  /** One file written through the API (file_too_large past it). */
  maxFileBytes: number;
  /** Members in one archive, dropped ones included (environment_invalid, reason too_many_entries). */
  maxEntries: number;
  /** Uncompressed bytes in one archive, dropped members included (reason too_large). */
  maxTotalBytes: number;
  /** Expanded / compressed bytes (reason compression_ratio), once the expanded size is past `ratioFloorBytes`. */
  maxCompressionRatio: number;
  ratioFloorBytes: number;
}

const MiB = 1024 * 1024;

export const defaultContentLimits: ContentLimits = {
  maxFileBytes: 100 * MiB,
  maxEntries: 50_000,
  maxTotalBytes: 512 * MiB,
  maxCompressionRatio: 100,
  ratioFloorBytes: 10 * MiB,
};

export function contentLimits(overrides: Partial<ContentLimits> = {}): ContentLimits {
  return { ...defaultContentLimits, ...overrides };
}
