/**
 * Whether an error is the database being unreachable, refusing work for now or not answering in time (an outage),
 * rather than anything the request did: Node socket and name-resolution errors (ECONNREFUSED, ECONNRESET,
 * EAI_AGAIN …), Postgres classes 08 (connection), 53 (resources) and 57P (operator intervention, shutdown), 57014 (a
 * statement cancelled, by its statement_timeout or an operator), and pg's own messages for a lost, unobtainable or
 * silent connection (including `timeout expired`, pg's message when opening a connection takes too long).
 *
 * The codes are matched whole: Node's and jose's `ERR_…` codes also begin with E, and they are bugs or bad input,
 * which must be reported as such rather than retried as an outage.
 */
export function isStorageOutage(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error instanceof StoreSilentError) return true;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^(E[A-Z]+|EAI_[A-Z]+|08[0-9A-Z]{3}|53[0-9A-Z]{3}|57P[0-9A-Z]{2}|57014)$/.test(code)) return true;
  return /Connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout|^timeout expired$/i.test(error.message);
}

/** A store's answer that did not come within its deadline: an outage (a silent host, a connection gone half-open). */
export class StoreSilentError extends Error {}

/**
 * `work`, or a StoreSilentError once the store has left it unanswered for `ms`: a connection that went silent without
 * closing answers nothing and never errs either, so only a deadline ends the wait. The work itself goes on (it may yet
 * land); only the waiting ends.
 */
export async function answeredWithin<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const silent = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreSilentError(`Postgres left ${what} unanswered for ${Math.round(ms)} ms`)), Math.max(0, ms));
    timer.unref();
  });
  try {
    return await Promise.race([work, silent]);
  } finally {
    clearTimeout(timer);
  }
}
