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
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^(E[A-Z]+|EAI_[A-Z]+|08[0-9A-Z]{3}|53[0-9A-Z]{3}|57P[0-9A-Z]{2}|57014)$/.test(code)) return true;
  return /Connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout|^timeout expired$/i.test(error.message);
}
