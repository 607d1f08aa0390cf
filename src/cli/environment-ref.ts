/** How the CLI names an environment: its id, or its name or slug in the caller's scope (read until the first match). */
import { BerthError } from '../../schemas/errors.ts';

export async function findEnvironmentId(ref: string, environments: AsyncIterable<{ id: string; name: string; slug: string }>): Promise<string> {
  if (/^henv_[0-9a-f]{32}$/.test(ref)) return ref;
  for await (const e of environments) if (e.name === ref || e.slug === ref) return e.id;
  throw new BerthError('environment_not_found', `No environment is named "${ref}".`, { name: ref });
}
