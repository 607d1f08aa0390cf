/**
 * The one stand-in left in the gateway tests, for a fault the real runtime cannot be made to produce on demand: an
 * unexpected internal error (a bug, a broken disk) thrown from the runtime API. It wraps the REAL runtime API and
 * passes every call through, except that `failNext(method, error)` makes the next call of `method` throw `error`.
 */
import type { RuntimeApi } from '../../src/runtime/runtime-api.ts';

export type FaultyRuntimeApi = RuntimeApi & { failNext(method: keyof RuntimeApi, error: Error): void };

export function withFaults(api: RuntimeApi): FaultyRuntimeApi {
  const faults = new Map<PropertyKey, Error>();
  const failNext = (method: keyof RuntimeApi, error: Error) => void faults.set(method, error);
  return new Proxy(api, {
    get(target, property, receiver) {
      if (property === 'failNext') return failNext;
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const fault = faults.get(property);
        if (fault) {
          faults.delete(property);
          throw fault;
        }
        return value.apply(target, args);
      };
    },
  }) as FaultyRuntimeApi;
}
