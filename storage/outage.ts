/**
 * Whether an error is the database being unreachable or refusing work for now (an outage), rather than anything the
 * request did: Node socket errors (ECONNREFUSED …), Postgres classes 08 (connection), 53 (resources) and 57P
 * (operator intervention, shutdown), and pg's own messages for a lost or unobtainable connection.
 */
export function isStorageOutage(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^(E[A-Z]+|08|53|57P)/.test(code)) return true;
  return /Connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(error.message);
}
