import { ActorHostError } from '../actors/errors.js';
import { isStorageOutage } from '../storage/outage.js';
import { HttpError } from '../transport/http/errors.js';

/**
 * The Runtime plane fails closed: when the stores that say who holds a lease (or whether a token's grant is live)
 * cannot answer, nobody is admitted, and the caller is told so with the one code the spec gives for it.
 */
export function coordinationUnavailable(cause: unknown): HttpError {
  return new HttpError(503, 'runtime_coordination_unavailable', 'runtime coordination is unavailable; nobody can be admitted until it returns, retry shortly', {
    family: 'coordination',
    headers: { 'retry-after': '2' },
    cause,
  });
}

/** Storage or actor-host failures that say nothing about the request: an outage, not a bug. */
export function isCoordinationOutage(error: unknown): boolean {
  if (error instanceof ActorHostError) return error.retryable;
  return isStorageOutage(error);
}

/** Runs a Runtime-plane step, turning an outage into 503 `runtime_coordination_unavailable`. */
export async function coordinated<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (!(error instanceof HttpError) && isCoordinationOutage(error)) throw coordinationUnavailable(error);
    throw error;
  }
}
