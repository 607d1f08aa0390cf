import { createRequire } from 'node:module';
import { constants } from 'node:os';

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

/** What an addon's call reports as an errno, as node reports one: with its code (EPIPE, ENOSPC, ...). */
export function errnoError(what: string, errno: number): Error & { code: string } {
  const code = Object.entries(constants.errno).find(([, n]) => n === errno)?.[0] ?? `errno ${errno}`;
  return Object.assign(new Error(`${what}: ${code}`), { code });
}
