/**
 * The README stands on its own: it points at nothing outside the repository (design notes or seed documents a
 * reader of a clone does not have), every repository path it names in backquotes exists, and it documents what a
 * new user needs without them: Docker, the profile fields, and how a command finds its server and token.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { profileSchema } from '../../schemas/profile.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

describe('the README', () => {
  it('refers to no document outside the repository', () => {
    expect(readme.match(/DESIGN(\.md)?\s*§|\bseeds?\/|\bseed 0\d\d\b/g)).toBeNull();
  });

  it('names only repository paths that exist', () => {
    const named = [...readme.matchAll(/`((?:src|test|schemas|bench|scripts|bin|\.ci)\/[^`\s*{}<>…]+)`/g)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(20);
    expect(named.filter((path) => !existsSync(join(root, path)))).toEqual([]);
  });

  it('has a Using Docker section, a row for every profile field, and states the target and token resolution once', () => {
    expect(readme).toMatch(/^## Using Docker$/m);
    expect(readme).toMatch(/never pull/i);
    for (const field of Object.keys(profileSchema.shape)) expect(readme, field).toMatch(new RegExp(`^ *\\| \`${field}\` \\|`, 'm'));
    expect(readme.match(/\*\*Which Berth a command talks to\*\*/g)).toHaveLength(1);
  });
});
