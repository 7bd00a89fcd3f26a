import { backendEndpoint } from '../../runtime/backend-grants.js';
import {
  PUBLISH_SCOPE,
  PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES,
  PUBLISHER_AUTHORITY_TIMEOUT_MS,
  PublisherAuthorityRequestSchema,
  PublisherAuthorityResponseSchema,
  type PublisherAuthorityRequest,
} from './publisher-authority.messages.js';

/**
 * Why the answer is what it is. `allowed` and `denied` are the backend's own decision; every other reason is a
 * failure, and every failure denies.
 */
export type PublisherAuthorityReason =
  | 'allowed'
  | 'denied'
  | 'grant_lacks_publish_scope'
  | 'url_invalid'
  | 'request_invalid'
  | 'timeout'
  | 'network_error'
  | 'redirect'
  | 'status'
  | 'response_too_large'
  | 'response_not_json'
  | 'response_invalid';

export interface PublisherAuthorityDecision {
  readonly allowed: boolean;
  readonly reason: PublisherAuthorityReason;
  /** For logs: the backend's own `reason`, the status received, or what failed. Never authority. */
  readonly detail?: string;
}

export interface PublisherAuthorityOptions {
  /** The scopes of the grant being forwarded: without `media:publish` the backend is not asked at all. */
  readonly grantScopes: readonly string[];
  readonly fetch?: typeof fetch;
  /** Whether the backend may be on this host's loopback (MEDIA_CALLBACK_ALLOW_LOOPBACK); off unless set. */
  readonly allowLoopback?: boolean;
  /** DNS: every address a host name has. Tests stand in for it; the default is the system resolver. */
  readonly resolve?: (hostname: string) => Promise<ReadonlyArray<{ readonly address: string; readonly family: 4 | 6 }>>;
  readonly timeoutMs?: number;
  readonly maxBytes?: number;
}

const deny = (reason: Exclude<PublisherAuthorityReason, 'allowed'>, detail?: string): PublisherAuthorityDecision =>
  Object.freeze(detail === undefined ? { allowed: false, reason } : { allowed: false, reason, detail });

/** Reads at most `maxBytes` of the body; undefined (and the stream cancelled) as soon as it is longer. */
async function boundedBody(response: Response, maxBytes: number): Promise<Uint8Array | undefined> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (declared > maxBytes) {
    await response.body?.cancel();
    return undefined;
  }
  if (!response.body) return new Uint8Array(0);
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.byteLength;
    if (length > maxBytes) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, length);
}

/**
 * Asks the Environment backend at `url` (a space policy's `roleAuthorityUrl`) whether an actor may publish. Never
 * throws and never allows by default: only a 200 whose body, within `maxBytes` and `timeoutMs` (covering the whole
 * exchange, body included), says `decision: "allow"` allows. Redirects are not followed (`redirect: 'manual'`): the
 * grant in the body must reach only the address the Environment configured.
 */
export async function authorizePublisher(url: string, body: PublisherAuthorityRequest, options: PublisherAuthorityOptions): Promise<PublisherAuthorityDecision> {
  const { grantScopes, fetch: fetchImpl = fetch, timeoutMs = PUBLISHER_AUTHORITY_TIMEOUT_MS, maxBytes = PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES } = options;
  if (!grantScopes.includes(PUBLISH_SCOPE)) return deny('grant_lacks_publish_scope', `the grant does not hold ${PUBLISH_SCOPE}`);
  const target = backendEndpoint(url);
  if (target === undefined) return deny('url_invalid', 'roleAuthorityUrl must be https (http only on loopback), canonical, without credentials or fragment');
  const request = PublisherAuthorityRequestSchema.safeParse(body);
  if (!request.success) return deny('request_invalid', request.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));

  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  try {
    let response: Response;
    try {
      response = await fetchImpl(target, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(request.data),
        redirect: 'manual',
        signal: abort.signal,
      });
    } catch (error) {
      return abort.signal.aborted ? deny('timeout', `no answer within ${timeoutMs} ms`) : deny('network_error', (error as Error).message);
    }
    if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
      await response.body?.cancel();
      return deny('redirect', `status ${response.status}`);
    }
    if (response.status !== 200) {
      await response.body?.cancel();
      return deny('status', `status ${response.status}`);
    }
    let bytes: Uint8Array | undefined;
    try {
      bytes = await boundedBody(response, maxBytes);
    } catch (error) {
      return abort.signal.aborted ? deny('timeout', `no complete answer within ${timeoutMs} ms`) : deny('network_error', (error as Error).message);
    }
    if (bytes === undefined) return deny('response_too_large', `more than ${maxBytes} bytes`);
    let json: unknown;
    try {
      json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    } catch {
      return deny('response_not_json');
    }
    const answer = PublisherAuthorityResponseSchema.safeParse(json);
    if (!answer.success) return deny('response_invalid', answer.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    const { decision, reason } = answer.data;
    if (decision !== 'allow') return deny('denied', reason);
    return Object.freeze(reason === undefined ? { allowed: true, reason: 'allowed' as const } : { allowed: true, reason: 'allowed' as const, detail: reason });
  } finally {
    clearTimeout(timer);
  }
}
