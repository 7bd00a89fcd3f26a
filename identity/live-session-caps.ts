import { sql, type Transaction } from 'kysely';
import type { Database } from '../storage/database.js';
import { HttpError } from '../transport/http/errors.js';

/**
 * What an account may hold live (unexpired, unrevoked) at once, per kind of session it can mint with a device key or
 * a bearer. Without them one device (or a stolen one) minted each at the device-assertion rate (≈ 100/s) and only the
 * expiry sweeps bounded the rows. Every cap is far above what a person uses: a person signs in to registry pages a
 * few times a day per browser (page), opens the console in a few browsers (console), runs a Desktop Shell or two
 * (desktop), runs one review host at a time (review capability) and signs the CLI in on a few machines (cli).
 *
 * Two rules. Browser sessions and CLI sign-ins *end the oldest*: a person cannot list or end page and console sessions
 * one by one, and a sign-in must not fail; so a new session never fails and the person's oldest goes (through the
 * kind's own revocation; for CLI sign-ins the least recently used, since a refresh marks a sign-in in use). Desktop management
 * sessions and review host capabilities are *refused* (429) at the cap: each is held by a running Shell or review
 * host, which the oldest-first rule would cut off mid-work, and both end on their own within an hour, which
 * Retry-After names.
 */
export const LIVE_SESSION_CAPS = Object.freeze({
  /** Page sessions (12 h): a new one ends the account's oldest beyond 50. */
  page: 50,
  /** Console sessions (≤ 8 h): a new one ends the account's oldest beyond 20. */
  console: 20,
  /** Desktop management sessions (1 h) of the current account epoch: the 21st is refused. */
  desktop: 20,
  /** Review host capabilities (15 min) of the account's enrolled devices: the 21st is refused. */
  reviewCapability: 20,
  /** CLI sign-ins (30-day grants): a new one ends the account's least recently used beyond 50. */
  cli: 50,
});

export type CappedSessionKind = keyof typeof LIVE_SESSION_CAPS;

/** The advisory-lock namespace of these caps (first key; the second is a hash of kind and account). */
const LIVE_SESSION_CAP_LOCK = 0x5e55_0001;

/**
 * Serialises one account's creations of one kind until the transaction ends: a creation counts (or trims) and inserts
 * under it, so two racing creations at the cap never both see room. Taken before any row lock of the kind's tables.
 */
export async function lockAccountSessions(trx: Transaction<Database>, kind: CappedSessionKind, accountId: string): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(${LIVE_SESSION_CAP_LOCK}::int4, hashtext(${`${kind} ${accountId}`}))`.execute(trx);
}

/** Seconds until `freesAt` (the soonest live one ends), at least 1. */
export function retryAfterSeconds(freesAt: number, now: number): number {
  return Math.max(1, Math.ceil((freesAt - now) / 1000));
}

/** 429 in the device plane's Problem format, naming the cap, with Retry-After. */
export function liveSessionQuotaExceeded(code: string, message: string, retryAfterS: number): HttpError {
  return new HttpError(429, code, `${message}; retry in ${retryAfterS} s`, { family: 'account_policy', headers: { 'retry-after': String(retryAfterS) } });
}
