/**
 * The error registry and its documentation stay in step (as Fastify's errors doc does): every code of
 * schemas/errors.ts appears in the README's error table with its HTTP status, and the table names no other code.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { errorCodes } from '../../schemas/errors.ts';

const readme = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '../../README.md'), 'utf8');

/** Rows of the table under "## Error codes": code -> HTTP status. */
function documentedCodes(): Map<string, number> {
  const section = readme.split(/^## Error codes$/m)[1]?.split(/^## /m)[0] ?? '';
  const rows = new Map<string, number>();
  for (const [, code, status] of section.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)) rows.set(code, Number(status));
  return rows;
}

describe('error registry', () => {
  it('should document every error code in the README with its HTTP status', () => {
    const documented = documentedCodes();
    for (const [code, { status }] of Object.entries(errorCodes)) {
      expect(documented.get(code), `README error table row for ${code}`).toBe(status);
    }
  });

  it('should not document codes that the registry does not have', () => {
    const unknown = [...documentedCodes().keys()].filter((code) => !Object.hasOwn(errorCodes, code));
    expect(unknown).toEqual([]);
  });
});
