import { defineConfig } from 'vitest/config';

// Real processes, real files and a real Docker engine: tests are slow-ish and must not share state.
export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
