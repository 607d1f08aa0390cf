/** An Environment's profile (DESIGN §8 fixed shape): which provider runs it and with what limits. */
import { z } from 'zod';

export const profileSchema = z.strictObject({
  provider: z.enum(['native', 'docker']).default('native'),
  image: z.string().min(1).max(512).optional(),
  memoryMb: z.number().int().min(16).max(1_048_576).optional(),
  cpus: z.number().positive().max(1024).optional(),
  pidsLimit: z.number().int().min(8).max(1_000_000).optional(),
  network: z.enum(['none', 'bridge']).optional(),
  idleSeconds: z.number().int().min(0).max(31_536_000).optional(),
  reuse: z.enum(['session', 'workspace', 'scope']).optional(),
  /** native only: run commands under bubblewrap (read-only root, private /tmp, workspace writable). */
  contain: z.boolean().optional(),
});

export type Profile = z.infer<typeof profileSchema>;
