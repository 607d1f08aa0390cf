/**
 * Members' writes while the data directory is under the event store's reserve (runtime/maintenance/disk-reserve.ts):
 * refused with `storage_full` before their body is read, except those that free space or end work (deletes, releases,
 * cancels, holds and pauses, a detach, a holder clear), so a member can always clean up. Admins are exempt.
 */
import type { FastifyInstance } from 'fastify';
import type { RuntimeApi } from '../runtime/runtime-api.ts';

const ENDS_WORK = /\/(release|cancel|hold|pause|detach|clear)$/;

/** Whether a route (its method and declared path) is refused to a member while under the reserve. */
export const refusedUnderReserve = (method: string, path: string): boolean =>
  method !== 'GET' && method !== 'HEAD' && method !== 'DELETE' && !ENDS_WORK.test(path);

/** Registered after authentication: the caller is known. */
export function installStorageGuard(app: FastifyInstance, api: RuntimeApi): void {
  app.addHook('onRequest', async (request) => {
    if (!request.caller || !refusedUnderReserve(request.method, request.routeOptions.url ?? '')) return;
    await api.assertStorageRoom(request.caller);
  });
}
