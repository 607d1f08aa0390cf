/** The byte counts the CLI prints: bytes below a KiB, then the largest binary unit with one decimal at most. */
import { describe, expect, it } from 'vitest';
import { humanSize } from '../../../src/cli/human-size.ts';

describe('humanSize', () => {
  it('prints bytes, KiB, MiB and GiB with at most one decimal', () => {
    expect(humanSize(0)).toBe('0 B');
    expect(humanSize(177)).toBe('177 B');
    expect(humanSize(1023)).toBe('1023 B');
    expect(humanSize(1024)).toBe('1 KiB');
    expect(humanSize(12_595)).toBe('12.3 KiB');
    expect(humanSize(4.5 * 1024 * 1024)).toBe('4.5 MiB');
    expect(humanSize(64 * 1024 * 1024)).toBe('64 MiB');
    expect(humanSize(3 * 1024 ** 3)).toBe('3 GiB');
  });

  it('moves to the next unit when rounding would reach 1024', () => {
    expect(humanSize(1024 * 1024 - 1)).toBe('1 MiB');
    expect(humanSize(1024 * 1023.94)).toBe('1023.9 KiB');
  });
});
