import { createRequire } from 'node:module';

/** A native addon built by `npm ci` (binding.gyp), or undefined where none was built: every caller works without. */
export function loadAddon<T>(name: string): T | undefined {
  const require = createRequire(import.meta.url);
  // From src/providers (tsx) or dist/src/providers (the build).
  for (const path of [`../../build/Release/${name}.node`, `../../../build/Release/${name}.node`]) {
    try {
      return require(path) as T;
    } catch {
      // next place
    }
  }
  return undefined;
}
