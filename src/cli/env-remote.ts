/**
 * The remote path of `berth env …` (taken when --url or BERTH_URL names a server): the same subcommands and output
 * as the in-process one in env.ts, through the typed client, in the scope of the token.
 */
import { BerthError } from '../../schemas/errors.ts';
import type { Profile } from '../../schemas/profile.ts';
import type { AllocationView, EnvironmentView } from '../runtime/runtime-api.ts';
import { UsageError } from './command-args.ts';
import { describe, envUsage, type EnvValues, type Subcommand } from './env.ts';
import { connectRemote, findEnvironment, isUnreachable, serverUrl, unreachable } from './remote.ts';
import { writeLine } from './stdout-lines.ts';

export async function envRemote(sub: Subcommand, args: string[], values: EnvValues, profile: Partial<Profile> | undefined): Promise<number> {
  for (const local of ['scope', 'data-dir', 'store'] as const) {
    if (values[local] !== undefined) throw new UsageError(`--${local} is for the in-process mode; a server takes the scope from the token`, envUsage);
  }
  const berth = await connectRemote(values);
  const print = (x: unknown) => writeLine(values.json ? JSON.stringify(x) : describe(x as EnvironmentView | AllocationView));
  try {
    switch (sub) {
      case 'create':
        await print(
          await berth.environments.create({
            name: args[0]!,
            profile: profile as Profile,
            ...(values.description !== undefined ? { description: values.description } : {}),
          }),
        );
        break;
      case 'ls':
        for (const e of await berth.environments.list()) await print(e);
        break;
      case 'acquire':
        await print(await berth.environments.acquire(await findEnvironment(berth, args[0]!)));
        break;
      case 'release': {
        const id = await findEnvironment(berth, args[0]!);
        const allocationId = args[1] ?? (await berth.environments.get(id)).allocation?.allocationId;
        if (!allocationId) throw new BerthError('invalid_state', 'The environment has no allocation to release.', { environmentId: id });
        await print(await berth.environments.release(id, allocationId));
        break;
      }
      case 'rm':
        await berth.environments.delete(await findEnvironment(berth, args[0]!));
        break;
    }
  } catch (error) {
    if (isUnreachable(error)) throw unreachable(serverUrl(values.url), error);
    throw error;
  }
  return 0;
}
