import { ActorHostError } from '../actors/errors.js';
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
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  // Node socket errors (ECONNREFUSED …) and Postgres classes 08 (connection), 53 (resources), 57P (shutdown).
  if (typeof code === 'string' && /^(E[A-Z]+|08|53|57P)/.test(code)) return true;
  return /Connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(error.message);
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
