/**
 * No import cycles in src/ or schemas/: the layers of DESIGN §2 point one way, and within a layer two modules that
 * import each other are one module written twice (as the env command table once was, per API).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importCycles } from '../fixtures/import-cycles.ts';

describe('the import graph', () => {
  it('should have no cycle in src/ or schemas/', () => {
    expect(importCycles(join(import.meta.dirname, '../..'), ['src', 'schemas'])).toEqual([]);
  });
});
