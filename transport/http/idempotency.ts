import { createHash } from 'node:crypto';
import type { IdempotencyStore, StoredResult } from '../../storage/idempotency-store.js';
import { HttpError } from './errors.js';

/** The spec's Idempotency-Key: 16 to 128 characters of `[A-Za-z0-9._~-]`. */
const KEY_PATTERN = /^[A-Za-z0-9._~-]{16,128}$/;

/** Reads and checks the header; `undefined` when absent and optional. */
export function readIdempotencyKey(
  headers: Readonly<Record<string, string>>,
  mode: 'required' | 'optional',
): string | undefined {
  const key = headers['idempotency-key'];
  if (key === undefined) {
    if (mode === 'required') {
      throw new HttpError(400, 'idempotency_key_required', 'this operation requires an Idempotency-Key header', {
        details: [{ pointer: '/idempotency-key', in: 'header', code: 'required', message: 'header is required' }],
      });
    }
    return undefined;
  }
  if (!KEY_PATTERN.test(key)) {
    throw new HttpError(400, 'idempotency_key_invalid', 'Idempotency-Key must be 16 to 128 characters of A-Z a-z 0-9 . _ ~ -', {
      details: [{ pointer: '/idempotency-key', in: 'header', code: 'pattern', message: 'does not match ^[A-Za-z0-9._~-]{16,128}$' }],
    });
  }
  return key;
}

/**
 * What makes two requests "the same": method, path, query, the body as JSON value (key order and whitespace do not
 * matter, so a client re-serialising its retry is still recognised) and the request headers the operation reads
 * (`If-Match`: the same body under another precondition is another request). Without such headers the fingerprint is
 * what it always was, so records made before still match their retries.
 */
export function requestFingerprint(
  method: string,
  path: string,
  query: string,
  body: unknown,
  headers: Readonly<Record<string, string | undefined>> = {},
): string {
  const hash = createHash('sha256')
    .update(`${method.toUpperCase()} ${path}?${query}\n`)
    .update(canonicalJson(body));
  if (Object.keys(headers).length > 0) hash.update(`\n${canonicalJson(headers)}`);
  return hash.digest('base64url');
}

function canonicalJson(value: unknown): string {
  if (value === undefined) return '';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export interface IdempotentOutcome extends StoredResult {
  readonly replayed: boolean;
}

/**
 * Runs `execute` at most once per (scope, key): an identical retry replays the stored result, a different request
 * under the same key is refused (422), and a retry while the first is still running is told to wait (409).
 * Server failures (5xx, or a throw) are not stored, so the client's retry runs again; nor are refusals that tell the
 * client when to come back (429, or any with Retry-After): replayed, they would refuse the very retry they ask for
 * for as long as the record is kept.
 */
export async function runIdempotently(
  store: IdempotencyStore,
  claim: { scope: string; key: string; fingerprint: string },
  execute: () => Promise<StoredResult>,
  /** Told when an applied result could not be recorded (the store failed after `execute`); for the log. */
  onUnrecorded: (error: unknown) => void = () => {},
): Promise<IdempotentOutcome> {
  const { scope, key, fingerprint } = claim;
  const existing = await store.begin(scope, key, fingerprint);
  switch (existing.kind) {
    case 'replay':
      return { ...existing.result, replayed: true };
    case 'mismatch':
      throw new HttpError(
        422,
        'idempotency_key_reused',
        'this Idempotency-Key was already used for a different request; use a new key for a new request',
      );
    case 'in_progress':
      throw new HttpError(409, 'idempotency_request_in_progress', 'a request with this Idempotency-Key is still running', {
        headers: { 'retry-after': '1' },
      });
    case 'started':
      break;
  }
  let result: StoredResult;
  try {
    result = await execute();
  } catch (error) {
    await store.abandon(scope, key, existing.claim).catch(() => {});
    throw error;
  }
  if (result.status >= 500 || result.status === 429 || result.headers['retry-after'] !== undefined) {
    await store.abandon(scope, key, existing.claim);
    return { ...result, replayed: false };
  }
  try {
    await store.complete(scope, key, existing.claim, result);
  } catch (error) {
    // The operation is applied: answering the store's failure (a 503, which says "not applied, retry") would invite
    // a second application once the claim lapses. The client gets its result; the claim stays pending, so a retry
    // meanwhile is told 409, and only after the claim timeout can the key run again.
    onUnrecorded(error);
  }
  return { ...result, replayed: false };
}
