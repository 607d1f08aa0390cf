/**
 * Events of the allocation stream (`allocation-<id>`): the persisted intent, what the provider reported, the uses
 * that pin the allocation, and its release. Shapes mirror the provider port (src/providers/provider.ts).
 */
import { z } from 'zod';
import { ownershipSchema, profileSchema, providerKindSchema } from '../profile.ts';
import { environmentIdSchema, poolIdSchema, resourceIdSchema } from '../ids.ts';
import type { EventUnion } from './event-map.ts';
import { atSchema, runtimeRecoveredSchema } from './runtime.ts';

export const physicalIdentitySchema = z.strictObject({
  provider: providerKindSchema,
  resourceId: z.string().min(1),
  incarnation: z.string().optional(),
  networkId: z.string().optional(),
  volume: z.string().optional(),
});

/**
 * A provider's AllocationReport. `absent` may say why (e.g. the image is missing) but is still confirmed absence;
 * `unreachable` marks the absence of an intent whose first call never reached the provider (nothing was sent).
 */
export const allocationReportSchema = z.discriminatedUnion('status', [
  z.strictObject({ status: z.literal('ready'), identity: physicalIdentitySchema }),
  z.strictObject({ status: z.literal('pending'), identity: physicalIdentitySchema.optional(), reason: z.string() }),
  z.strictObject({ status: z.literal('absent'), reason: z.string().optional(), unreachable: z.literal(true).optional() }),
  z.strictObject({ status: z.literal('unknown'), reason: z.string() }),
  z.strictObject({ status: z.literal('fenced'), identity: physicalIdentitySchema, reason: z.string() }),
]);

/** A directory bound read-only into a managed allocation when it is made (the content version at /env/<slug>). */
export const contentMountSchema = z.strictObject({
  source: z.string().min(1).max(4096),
  target: z.string().regex(/^\/env\/[a-z0-9-]{1,64}$/),
});

export const useKindSchema = z.enum(['execution', 'mount', 'admission', 'physical']);

export const allocationEvents = {
  /** The intent, persisted before the provider is called (its effect is `provider.allocate`). */
  'allocation.intended': z.strictObject({
    /** The Environment it is made for, or the warm pool that makes it ahead of need (until a claim). */
    environmentId: environmentIdSchema.or(poolIdSchema),
    requestId: resourceIdSchema,
    generation: z.number().int().positive(),
    profile: profileSchema,
    /** The provider's ownership of what it makes (absent in intents written before it was recorded). */
    ownership: ownershipSchema.optional(),
    /** The content version the allocation binds (Docker: fixed for its life; absent when it binds none). */
    contentVersion: z.number().int().positive().optional(),
    /** Read-only binds made with the allocation: the host directory of `contentVersion` at /env/<slug>. */
    mounts: z.array(contentMountSchema).max(8).optional(),
    at: atSchema,
  }),
  /**
   * A ready pooled allocation is rebound to an Environment (its new owner, generation and profile): the one durable
   * step of a warm claim. Accepted once, while the pool owns it and nothing uses it.
   */
  'allocation.claimed': z.strictObject({
    environmentId: environmentIdSchema,
    generation: z.number().int().positive(),
    /** The environment's profile: its limits were applied in place before the claim (Provider.pooling). */
    profile: profileSchema,
    /**
     * The environment's content version the claim shows the container (Provider.pooling.applyContent): applied once
     * this is durable, before the environment hears `allocated`, and again by the environment's recovery.
     */
    contentVersion: z.number().int().positive().optional(),
    at: atSchema,
  }),
  /** The outcome of the provider call in flight (allocate or inspect). */
  'allocation.reported': z.strictObject({ report: allocationReportSchema, at: atSchema }),
  /** Maintenance resumes a verified partial allocation under its original intent (never one with uses). */
  'allocation.resume_requested': z.strictObject({ at: atSchema }),
  /** Maintenance reconciles: inspect by the original request id (or retry deallocation when releasing). */
  'allocation.reconcile_requested': z.strictObject({ at: atSchema }),
  /** A durable claim. Admission uses name the runtime (id and epoch) that wrote them. Idempotent per useId. */
  'allocation.use_acquired': z
    .strictObject({
      useId: resourceIdSchema,
      kind: useKindSchema,
      runtimeId: z.string().min(1).optional(),
      epoch: z.number().int().nonnegative().optional(),
      at: atSchema,
    })
    .refine((u) => u.kind !== 'admission' || (u.runtimeId !== undefined && u.epoch !== undefined), {
      message: 'an admission use carries runtimeId and epoch',
    }),
  'allocation.use_released': z.strictObject({ useId: resourceIdSchema, at: atSchema }),
  /** Closes admission and deallocates. `idle` comes from the maintenance loop's idle reclamation. */
  'allocation.release_requested': z.strictObject({ reason: z.enum(['explicit', 'idle']), at: atSchema }),
  /** The provider's answer to deallocate: `terminated` confirms physical termination. */
  'allocation.deallocated': z.strictObject({ result: z.enum(['terminated', 'unknown']), at: atSchema }),
  'runtime.recovered': runtimeRecoveredSchema,
};

export type AllocationEvent = EventUnion<typeof allocationEvents>;
export type AllocationReportData = z.output<typeof allocationReportSchema>;
export type PhysicalIdentityData = z.output<typeof physicalIdentitySchema>;
export type UseKind = z.output<typeof useKindSchema>;
export type ContentMountData = z.output<typeof contentMountSchema>;
