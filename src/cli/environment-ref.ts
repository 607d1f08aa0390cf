/** How the CLI names an environment: its id, or its name or slug in the caller's scope. */
import { BerthError } from '../../schemas/errors.ts';

export async function findEnvironmentId(ref: string, list: () => Promise<{ id: string; name: string; slug: string }[]>): Promise<string> {
  if (/^henv_[0-9a-f]{32}$/.test(ref)) return ref;
  const found = (await list()).find((e) => e.name === ref || e.slug === ref);
  if (!found) throw new BerthError('environment_not_found', `No environment is named "${ref}".`, { name: ref });
  return found.id;
}
