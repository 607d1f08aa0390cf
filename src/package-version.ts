/**
 * The package's version, read through the package's self-reference (`berth/package.json`) so that it resolves alike
 * from the sources, from the build in dist/ and from an installed copy.
 */
import { createRequire } from 'node:module';

export const packageVersion: string = (createRequire(import.meta.url)('berth/package.json') as { version: string }).version;
