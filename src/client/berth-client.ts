/**
 * The typed client of a Berth gateway: every resource of berth-core.ts, plus `sandboxes` (a machine, a workspace and
 * one open turn made and killed in one call). `Berth.connect({url, token})`; see berth-core.ts for the resources.
 * The sandboxes depend on the core only, so neither module needs the other back.
 */
import { BerthCore, type ConnectOptions } from './berth-core.ts';
import { Sandboxes } from './sandboxes.ts';

export * from './berth-core.ts';

export class Berth extends BerthCore {
  /** Connects and checks the token (GET /v1/capabilities). */
  static override async connect(options: ConnectOptions): Promise<Berth> {
    return new Berth(...(await BerthCore.open(options)));
  }

  private sandboxApi: Sandboxes | undefined;

  /** Sandboxes: a machine, a workspace and one open turn made (and killed) in one call, with `run` and `files`. */
  get sandboxes(): Sandboxes {
    return (this.sandboxApi ??= new Sandboxes(this));
  }
}
