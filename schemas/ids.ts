/** Identifier formats shared by events, commands and API bodies. */
import { z } from 'zod';

/** An Environment id: `henv_` and 32 lowercase hex digits (seed 001). */
export const environmentIdSchema = z.string().regex(/^henv_[0-9a-f]{32}$/, 'expected henv_ followed by 32 hex digits');

/**
 * A warm pool's id, `hpool_` and its admin-given name: the owner an allocation records while it waits in the pool
 * (src/runtime/pools), in the place of an Environment id, until a claim rebinds it to one.
 */
export const poolIdSchema = z.string().regex(/^hpool_[a-z0-9-]{1,64}$/, 'expected hpool_ followed by a pool name');
export const isPoolId = (id: string): boolean => id.startsWith('hpool_');

/** Any other resource id (allocation, request, execution, use, session, workspace): opaque, chosen by its creator. */
export const resourceIdSchema = z.string().min(1).max(256);
