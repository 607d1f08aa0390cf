/**
 * The strictly increasing per-resource update timestamp (seed 000: catalog events and snapshots use one): the event's
 * clock reading, or one millisecond after the previous value when the clock did not move forward.
 */
export const nextUpdatedAt = (previous: number, at: number): number => Math.max(previous + 1, at);
