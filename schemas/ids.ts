/** Identifier formats shared by events, commands and API bodies. */
import { z } from 'zod';

/** An Environment id: `henv_` and 32 lowercase hex digits (seed 001). */
export const environmentIdSchema = z.string().regex(/^henv_[0-9a-f]{32}$/, 'expected henv_ followed by 32 hex digits');

/** Any other resource id (allocation, request, execution, use, session, workspace): opaque, chosen by its creator. */
export const resourceIdSchema = z.string().min(1).max(256);
