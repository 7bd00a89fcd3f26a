import { ActorHostError } from '../actors/errors.js';
import { isStorageOutage } from '../storage/outage.js';
import { coordinationUnavailable } from '../transport/http/credentials.js';
import { HttpError } from '../transport/http/errors.js';

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
    throw asCoordinationError(error);
  }
}

/** What a Runtime-plane step throws for `error`: an outage becomes 503 `runtime_coordination_unavailable`. */
export function asCoordinationError(error: unknown): unknown {
  return !(error instanceof HttpError) && isCoordinationOutage(error) ? coordinationUnavailable(error) : error;
}
