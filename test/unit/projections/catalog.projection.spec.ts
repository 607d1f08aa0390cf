/**
 * The catalog read model names an environment's state as the environment machine does: folded from the same events,
 * its entry's `state` is the machine's state after every one of them, and every live state is one the API documents.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { environmentStateSchema } from '../../../schemas/states.ts';
import type { RecordedEvent } from '../../../src/store/event-store.ts';
import { environmentMachine } from '../../../src/machines/environment.machine.ts';
import { catalogProjection, type CatalogEntry } from '../../../src/projections/catalog.projection.ts';
import { SqliteReadModelStore } from '../../../src/projections/sqlite-read-model-store.ts';
import { environmentActor, snapshotAfter } from '../machines/machine-actors.ts';

const ENV = `henv_${'c'.repeat(32)}`;
const created = { type: 'environment.created', name: 'Catalogued', slug: 'catalogued', scope: 'team-a', profile: { provider: 'docker' }, at: 1_000 };
const allocationEvent = (type: string, n: number, at: number, extra: object = {}) => ({ type, allocationId: `alloc-${n}`, ...extra, at });
/** Every allocation notice the machine takes, through two generations, then the delete. */
const history = [
  created,
  allocationEvent('environment.acquisition_requested', 1, 2_000, { requestId: 'req-1', generation: 1 }),
  allocationEvent('environment.allocation_failed', 1, 2_100, { reason: 'image missing' }),
  allocationEvent('environment.acquisition_requested', 2, 3_000, { requestId: 'req-2', generation: 2 }),
  allocationEvent('environment.allocated', 2, 3_100, { generation: 2 }),
  allocationEvent('environment.allocation_lost', 2, 3_200, { reason: 'container gone' }),
  allocationEvent('environment.allocation_releasing', 2, 3_300),
  allocationEvent('environment.allocation_released', 2, 3_400),
  { type: 'environment.deleted', at: 4_000 },
];

const recorded = ({ type, ...data }: { type: string }, i: number): RecordedEvent => ({
  id: `event-${i}`,
  stream: `environment-${ENV}`,
  revision: BigInt(i),
  position: BigInt(i),
  type,
  data,
  metadata: {},
  createdAt: new Date(0).toISOString(),
});

describe('catalog projection: one name per environment state', () => {
  it('should hold the environment machine\'s state after every event, and drop the environment once deleted', () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-catalog-'));
    const models = SqliteReadModelStore.open(join(dir, 'projections.sqlite3'));
    try {
      const catalog = models.tables(catalogProjection, 1);
      history.forEach((event, i) => {
        models.write(() => catalogProjection.reduce(catalog, recorded(event, i) as never));
        const machineState = snapshotAfter(environmentActor, ENV, history.slice(0, i + 1) as never).value;
        const entry: CatalogEntry | undefined = catalog.environments.get(ENV);
        if (machineState === 'deleted') expect(entry).toBeUndefined();
        else expect([event.type, entry?.state]).toEqual([event.type, machineState]);
      });
    } finally {
      models.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('should document exactly the machine\'s live states as the API\'s environment states', () => {
    const live = Object.keys(environmentMachine.states).filter((s) => s !== 'pristine' && s !== 'deleted');
    expect(live.sort()).toEqual([...environmentStateSchema.options].sort());
  });
});
