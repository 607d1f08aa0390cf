/** `POST /v1/retention/run`: one retention pass now (admin only; the policy itself is set by the admin's environment). */
import { z } from 'zod';
import { defineRoute, resourcePlugin } from '../route.ts';

const retentionReportSchema = z.object({
  cutoff: z.number().int().describe('Executions last changed before this time (ms since the epoch) were aged out'),
  compacted: z.number().int(),
  removed: z.number().int(),
  archived: z.number().int(),
  kept: z.number().int().describe('Artifacts kept: the empty one, and bytes a newer execution saved too (they go when it ages out)'),
  failed: z.number().int(),
  lastError: z.string().optional().describe('Why the last failed execution was left as it was'),
});

export const retentionPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'POST',
      path: '/v1/retention/run',
      summary: 'Run one retention pass now (admin only; invalid_state when retention is off)',
      // The policy is the admin's environment: a request carries none, and one that tries is refused.
      body: z.strictObject({}).optional(),
      responses: { 200: { description: 'What the pass did', schema: retentionReportSchema } },
    },
    async ({ deps, caller }) => deps.api.runRetention(caller),
  ),
]);
