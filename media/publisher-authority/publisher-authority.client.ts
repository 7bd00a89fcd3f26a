import { lookup as systemLookup } from 'node:dns/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { backendEndpoint } from '../../runtime/backend-grants.js';
import { isLoopback, refuseDestination, type DestinationRefusal } from './publisher-authority.destination.js';
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
  | 'destination_forbidden'
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

/** DNS: every address a host name has. */
export type ResolveHost = (hostname: string) => Promise<ReadonlyArray<{ readonly address: string; readonly family: 4 | 6 }>>;

export interface PublisherAuthorityOptions {
  /** The scopes of the grant being forwarded: without `media:publish` the backend is not asked at all. */
  readonly grantScopes: readonly string[];
  /** Whether the backend may be on this host's loopback, and only then over http (MEDIA_CALLBACK_ALLOW_LOOPBACK). Off by default. */
  readonly allowLoopback?: boolean;
  /** DNS; tests stand in for it. The default is the system's (getaddrinfo, as Node connects: hosts file included). */
  readonly resolve?: ResolveHost;
  readonly timeoutMs?: number;
  readonly maxBytes?: number;
}

const deny = (reason: Exclude<PublisherAuthorityReason, 'allowed'>, detail?: string): PublisherAuthorityDecision =>
  Object.freeze(detail === undefined ? { allowed: false, reason } : { allowed: false, reason, detail });

const systemResolve: ResolveHost = async (hostname) =>
  (await systemLookup(hostname, { all: true, verbatim: true })).map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));

/** What refused a resolved address: the lookup fails with it, and the connection is never opened. */
class DestinationForbidden extends Error {
  constructor(readonly refusal: DestinationRefusal) {
    super(`${refusal.address} (${refusal.range})`);
  }
}

/**
 * A `lookup` for node:net that resolves the name, refuses it whole when any of its addresses is one the callback may
 * not reach (one forbidden answer among public ones is how DNS rebinding is usually tried), and hands the connection
 * only the addresses it checked, so what is connected to is what was checked.
 */
function guardedLookup(resolve: ResolveHost, refuse: (address: string) => DestinationRefusal | undefined): LookupFunction {
  return (hostname, options, callback) => {
    const reply = (error: Error | null, answers: ReadonlyArray<{ address: string; family: number }> = []) =>
      process.nextTick(() => {
        if (error) callback(error, '', 0);
        else if (options.all) callback(null, answers.map(({ address, family }) => ({ address, family })));
        else callback(null, answers[0]!.address, answers[0]!.family);
      });
    Promise.resolve()
      .then(() => resolve(hostname))
      .then(
        (answers) => {
          for (const { address } of answers) {
            const refusal = refuse(address);
            if (refusal) return reply(new DestinationForbidden(refusal));
          }
          const usable = answers.filter(({ family }) => !options.family || family === options.family);
          if (usable.length === 0) return reply(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }));
          return reply(null, usable);
        },
        (error: unknown) => reply(error instanceof Error ? error : new Error(String(error))),
      );
  };
}

type Exchange =
  | { readonly kind: 'answer'; readonly body: Buffer }
  | { readonly kind: 'redirect' | 'status'; readonly status: number }
  | { readonly kind: 'too_large' }
  | { readonly kind: 'timeout'; readonly answered: boolean }
  | { readonly kind: 'forbidden'; readonly refusal: DestinationRefusal }
  | { readonly kind: 'network'; readonly message: string };

/**
 * One POST, on a connection of its own (no agent: a pooled socket would be one this lookup never checked), within
 * `timeoutMs` from the start to the end of the body, reading at most `maxBytes` of it. Settles once; the request is
 * destroyed when it does. TLS is verified (rejectUnauthorized, against the configured name).
 */
function exchange(target: URL, host: string, payload: string, lookup: LookupFunction, timeoutMs: number, maxBytes: number): Promise<Exchange> {
  return new Promise((resolve) => {
    let answered = false;
    let settled = false;
    const https = target.protocol === 'https:';
    const request = (https ? httpsRequest : httpRequest)({
      host,
      ...(target.port === '' ? {} : { port: Number(target.port) }),
      path: `${target.pathname}${target.search}`,
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'content-length': Buffer.byteLength(payload) },
      agent: false,
      lookup,
      ...(https ? { rejectUnauthorized: true } : {}),
    });
    const settle = (outcome: Exchange): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => settle({ kind: 'timeout', answered }), timeoutMs);
    request.on('error', (error) =>
      settle(error instanceof DestinationForbidden ? { kind: 'forbidden', refusal: error.refusal } : { kind: 'network', message: error.message }),
    );
    request.on('response', (response: IncomingMessage) => {
      answered = true;
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400) return settle({ kind: 'redirect', status });
      if (status !== 200) return settle({ kind: 'status', status });
      if (Number(response.headers['content-length'] ?? Number.NaN) > maxBytes) return settle({ kind: 'too_large' });
      const chunks: Buffer[] = [];
      let length = 0;
      response.on('data', (chunk: Buffer) => {
        length += chunk.byteLength;
        if (length > maxBytes) settle({ kind: 'too_large' });
        else chunks.push(chunk);
      });
      response.on('end', () => settle({ kind: 'answer', body: Buffer.concat(chunks, length) }));
      response.on('error', (error) => settle({ kind: 'network', message: error.message }));
      response.on('close', () => settle({ kind: 'network', message: 'the answer ended before its end' }));
      return undefined;
    });
    request.end(payload);
  });
}

/**
 * Asks the Environment backend at `url` (a space policy's `roleAuthorityUrl`) whether an actor may publish. Never
 * throws and never allows by default: only a 200 whose body, within `maxBytes` and `timeoutMs` (covering the whole
 * exchange: DNS, connection, body), says `decision: "allow"` allows. Redirects are not followed: the grant in the body
 * must reach only the address the Environment configured. That address is checked where it is connected to (a
 * literal before connecting, a name's every address after DNS, at each call): only public unicast, loopback when
 * `allowLoopback`, http only to loopback (publisher-authority.destination.ts); anything else is
 * `destination_forbidden`, without a connection.
 */
export async function authorizePublisher(url: string, body: PublisherAuthorityRequest, options: PublisherAuthorityOptions): Promise<PublisherAuthorityDecision> {
  try {
    return await ask(url, body, options);
  } catch (error) {
    return deny('network_error', error instanceof Error ? error.message : String(error));
  }
}

async function ask(url: string, body: PublisherAuthorityRequest, options: PublisherAuthorityOptions): Promise<PublisherAuthorityDecision> {
  const { grantScopes, allowLoopback = false, resolve = systemResolve, timeoutMs = PUBLISHER_AUTHORITY_TIMEOUT_MS, maxBytes = PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES } = options;
  if (!grantScopes.includes(PUBLISH_SCOPE)) return deny('grant_lacks_publish_scope', `the grant does not hold ${PUBLISH_SCOPE}`);
  const endpoint = backendEndpoint(url);
  if (endpoint === undefined) return deny('url_invalid', 'roleAuthorityUrl must be https (http only on loopback), canonical, without credentials or fragment');
  const request = PublisherAuthorityRequestSchema.safeParse(body);
  if (!request.success) return deny('request_invalid', request.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));

  const target = new URL(endpoint);
  const host = target.hostname.startsWith('[') ? target.hostname.slice(1, -1) : target.hostname;
  const refuse = (address: string): DestinationRefusal | undefined =>
    refuseDestination(address, { allowLoopback }) ??
    (target.protocol === 'http:' && !isLoopback(address) ? Object.freeze({ address, range: 'not_loopback_over_http' }) : undefined);
  const forbidden = (refusal: DestinationRefusal) =>
    deny('destination_forbidden', `${refusal.address} (${refusal.range})${refusal.address === host ? '' : ` for ${host}`}`);
  // node:net connects to a literal address without a lookup: it is checked here instead.
  if (isIP(host) !== 0) {
    const refusal = refuse(host);
    if (refusal) return forbidden(refusal);
  }

  const outcome = await exchange(target, host, JSON.stringify(request.data), guardedLookup(resolve, refuse), timeoutMs, maxBytes);
  switch (outcome.kind) {
    case 'forbidden':
      return forbidden(outcome.refusal);
    case 'network':
      return deny('network_error', outcome.message);
    case 'timeout':
      return deny('timeout', `no ${outcome.answered ? 'complete ' : ''}answer within ${timeoutMs} ms`);
    case 'redirect':
    case 'status':
      return deny(outcome.kind, `status ${outcome.status}`);
    case 'too_large':
      return deny('response_too_large', `more than ${maxBytes} bytes`);
    case 'answer':
      break;
  }
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(outcome.body));
  } catch {
    return deny('response_not_json');
  }
  const answer = PublisherAuthorityResponseSchema.safeParse(json);
  if (!answer.success) return deny('response_invalid', answer.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  const { decision, reason } = answer.data;
  if (decision !== 'allow') return deny('denied', reason);
  return Object.freeze(reason === undefined ? { allowed: true, reason: 'allowed' as const } : { allowed: true, reason: 'allowed' as const, detail: reason });
}
