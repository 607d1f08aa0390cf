/** Shared set-up for the import specs: a fresh environment under its own temporary base, and the checks around it. */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { BerthError } from '../../../schemas/errors.ts';
import { EnvironmentContent } from '../../../src/content/environment-content.ts';

export interface ImportFixture {
  /** The temporary base: it holds `env` and nothing else, before and after. */
  base: string;
  /** A separate scratch directory for building archives. */
  scratch: string;
  content: EnvironmentContent;
  cleanup(): void;
}

export function importFixture(limits = {}): ImportFixture {
  const base = mkdtempSync(path.join(tmpdir(), 'berth-import-'));
  const scratch = mkdtempSync(path.join(tmpdir(), 'berth-import-scratch-'));
  return {
    base,
    scratch,
    content: new EnvironmentContent(path.join(base, 'env'), limits),
    cleanup: () => {
      rmSync(base, { recursive: true, force: true });
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}

/** Nothing was written outside the environment's directory, and no staging is left behind. */
export function expectConfined(fixture: ImportFixture): void {
  expect(readdirSync(fixture.base)).toEqual(['env']);
  const envEntries = readdirSync(path.join(fixture.base, 'env'));
  expect(envEntries.every((name) => ['source', 'staging', 'versions'].includes(name))).toBe(true);
  if (envEntries.includes('staging')) expect(readdirSync(fixture.content.layout.staging)).toEqual([]);
  for (const outside of ['/abs', '/evil', '/etc/berth-evil', '/tmp/berth-evil', path.join(tmpdir(), 'evil')]) {
    expect(existsSync(outside), outside).toBe(false);
  }
}

export async function refusedWith(promise: Promise<unknown>): Promise<BerthError> {
  try {
    await promise;
  } catch (e) {
    if (e instanceof BerthError) return e;
    throw e;
  }
  throw new Error('expected the import to be refused');
}

/** Every path in the source, sorted (directories end with `/`). */
export function sourcePaths(content: EnvironmentContent): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        out.push(`${childRel}/`);
        walk(path.join(dir, entry.name), childRel);
      } else out.push(childRel);
    }
  };
  if (existsSync(content.layout.source)) walk(content.layout.source, '');
  return out.sort();
}
