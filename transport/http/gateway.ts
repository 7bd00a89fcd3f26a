import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type * as z from 'zod';
import { ActorHostError } from '../../actors/errors.js';
import type { IdempotencyStore, StoredResult } from '../../storage/idempotency-store.js';
import { unstorableTextAt } from '../../storage/storable-text.js';
import { isStorageOutage } from '../../storage/outage.js';
import { LogThrottle } from '../../actors/log-throttle.js';
import { requestHeaders, type HttpResponse, type TemplatedApp } from '../uws.js';
import { clientBucket } from './client-address.js';
import { anonymous, bearerChallenge, coordinationUnavailable, runtimeCredentials, takesBearer, type CredentialVerifiers, type IncomingRequest, type Principal } from './credentials.js';
import { HttpError, renderError, serverDraining, unstorableTextDetail, validationDetails, type ErrorDetail, type ErrorFormat } from './errors.js';
import { readIdempotencyKey, requestFingerprint, runIdempotently } from './idempotency.js';
import { maySpellProto, protoMemberAt } from '../proto-member.js';
import { watchAbort, writeReply, type AbortWatch } from './reply-writer.js';
import { FixedJson, type AnyRoute } from './route.js';
import { framingRefusal, hasBody } from './framing.js';
import type { RateLimiter } from './rate-limit.js';
import { Router } from './router.js';

export interface HttpObserver {
  requestCompleted(operation: string, method: string, status: number, durationMs: number): void;
}

export interface GatewayOptions {
  readonly routes: readonly AnyRoute[];
  readonly verifiers: CredentialVerifiers;
  readonly idempotency: IdempotencyStore;
  readonly logger: Logger;
  /** Default request body limit; a route may set a lower one. */
  readonly maxBodyBytes: number;
  readonly observer?: HttpObserver;
  /** Needed when any route declares a rate limit. */
  readonly rateLimiter?: RateLimiter;
  /** Whether pages of this origin may call the `cors` routes; absent, none may. */
  readonly corsOrigins?: (origin: string) => Promise<boolean>;
}

/** Request headers the API reads, which a cross-origin page must be allowed to send. */
const CORS_ALLOWED_HEADERS = 'authorization, content-type, if-match, if-none-match, idempotency-key, x-platform-runtime-session, x-platform-runtime-lease, x-platform-runtime-lease-version';
/** Response headers beyond the CORS-safelisted ones that a page needs to read. */
const CORS_EXPOSED_HEADERS = 'etag, retry-after, x-request-id, idempotent-replayed, www-authenticate';
const CORS_MAX_AGE_S = 600;

/** RFC 9110 8.3.1, 5.6.6: type, subtype and parameter name in any case, and the charset's value quoted or not. */
const JSON_TYPE = /^application\/(?:[a-z0-9.+-]+\+)?json\s*(?:;\s*charset=(?:utf-8|"utf-8")\s*)?$/i;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Response headers every API answer carries. */
const BASE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
});

export function newRequestId(): string {
  return `req_${randomBytes(12).toString('base64url')}`;
}

/** `onAbort` is set while the body is read, and again while the reply is written: the client going away ends either wait. */
type RequestState = AbortWatch;

interface Reply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  readonly body: Buffer | string;
}

/**
 * The HTTP side of the uWebSockets.js server. Each request: capture what uWS lends us synchronously, read the body
 * under its limit, authenticate with the route's credential, validate path, query and body against the route's
 * schemas, run the handler (through the idempotency record when the route takes a key), validate the response against
 * its declared schema, and write it through the reply writer (corked, streamed to a client as it reads). Every
 * failure becomes one of the spec's two error bodies.
 */
export class HttpGateway {
  readonly #router: Router;
  readonly #options: GatewayOptions;
  /** Each fixed body validated and serialised once, for the schema that checked it. */
  readonly #fixedBodies = new WeakMap<FixedJson<unknown>, { readonly schema: z.ZodType; readonly bytes: Buffer }>();
  /** Server faults: a dead dependency fails every request alike, and must not print a line for each. */
  readonly #faults: LogThrottle;
  #inFlight = 0;
  #draining = false;
  #idle: Array<() => void> = [];

  constructor(options: GatewayOptions) {
    for (const route of options.routes) {
      if (route.credential !== 'none' && !options.verifiers[route.credential]) {
        throw new Error(`route ${route.operationId} takes credential ${route.credential}, which has no verifier`);
      }
      if (route.path.includes('{') && !route.params) {
        throw new Error(`route ${route.operationId} has path parameters but no params schema`);
      }
      if (route.rateLimit && !options.rateLimiter) throw new Error(`route ${route.operationId} is rate limited but no limiter is given`);
    }
    this.#router = new Router(options.routes);
    this.#options = options;
    this.#faults = new LogThrottle(options.logger);
  }

  get draining(): boolean {
    return this.#draining;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  mount(app: TemplatedApp): void {
    app.any('/*', (res, req) => {
      const started = performance.now();
      const requestId = newRequestId();
      const headers = requestHeaders(req);
      const request = {
        method: req.getMethod().toUpperCase(),
        path: req.getUrl(),
        query: req.getQuery() ?? '',
        headers,
        remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
      };
      const state: RequestState = watchAbort(res);
      this.#inFlight++;
      void this.#serve(res, request, requestId, state, started).finally(() => {
        if (--this.#inFlight === 0) for (const wake of this.#idle.splice(0)) wake();
      });
    });
  }

  /** New requests get 503 from now on; those already running finish. */
  startDraining(): void {
    this.#draining = true;
  }

  /** Resolves true when no request is in flight, false if `timeoutMs` passes first. */
  waitIdle(timeoutMs: number): Promise<boolean> {
    if (this.#inFlight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.#idle.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  async #serve(
    res: HttpResponse,
    request: Omit<IncomingRequest, 'body'>,
    requestId: string,
    state: RequestState,
    started: number,
  ): Promise<void> {
    const log = this.#options.logger.child({ requestId });
    let operation = 'unmatched';
    /** The error code of a refusal, for its log line: the status alone does not say which of an operation's 403s. */
    let refusedWith: string | undefined;
    let format: ErrorFormat = 'api';
    const match = this.#router.match(request.method, request.path);
    // A page may read the answer of a cross-origin operation, refusals included, when its origin is allowed.
    const cors =
      match.kind === 'found' ? match.route.cors === true
      : match.kind === 'method_not_allowed' ? match.corsMethods.length > 0
      : match.kind === 'bad_path' && match.cors;
    let allowedOrigin: string | undefined;
    // uWS hands the body bytes that arrive before onData is set to nobody: reading starts here, before the first await
    // (the origin lookup below may query Postgres); a refusal of the body (413) is answered where it is awaited.
    // Framing uWS read leniently is refused before anything else; its body is not read (the connection closes).
    const framing = framingRefusal(request.headers);
    const bodyRead = match.kind === 'found' && framing === undefined ? readBody(res, request.headers, match.route.maxBodyBytes ?? this.#options.maxBodyBytes, state) : undefined;
    bodyRead?.catch(() => {});
    // Returns early (preflight, an aborted body read) or with the route's reply; a throw becomes an error reply below.
    const dispatch = async (): Promise<Reply | undefined> => {
      // An outage of the origin lookup below is an error of the operation, so it takes the operation's body format
      // (an OAuth body on the token endpoint).
      if (match.kind === 'found') format = match.route.errorFormat;
      else if (match.kind === 'method_not_allowed') format = match.errorFormat ?? format;
      if (framing !== undefined) {
        // Answered once uWS has parsed what it received with this request: a `Connection: close` answer written while
        // uWS parses (inside its cork) leaves the connection open, and uWS goes on to serve the bytes behind it as the
        // next request. Past the parse, a request found behind this one has made uWS drop the connection unanswered;
        // otherwise the answer goes out and the connection closes.
        await new Promise((resolve) => setImmediate(resolve));
        throw framing;
      }
      // Decided before anything runs: a lookup failure must refuse the request, not hide a result it produced.
      if (cors && request.headers.origin !== undefined) {
        // A preflight of a Runtime call is part of that call: an outage answers with the Runtime's code too.
        const routes = match.kind === 'found' ? [match.route] : match.kind === 'method_not_allowed' ? match.corsRoutes : [];
        const runtime = routes.some((route) => runtimeCredentials.has(route.credential));
        allowedOrigin = await this.#allowedOrigin(request.headers.origin, runtime);
      }
      if (this.#draining && !(match.kind === 'found' && match.route.servesWhileDraining)) {
        throw serverDraining();
      }
      // A body sent to no operation is not read: uWS would read it to its end, however long, to find the next request.
      // The refusal closes the connection instead, answered past uWS's parse like a framing refusal (see above).
      const unread = match.kind !== 'found' && hasBody(request.headers) ? { connection: 'close' } : undefined;
      if (unread) await new Promise((resolve) => setImmediate(resolve));
      if (match.kind === 'not_found') {
        throw new HttpError(404, 'route_not_found', `no route ${request.method} ${request.path}`, { family: 'catalog', ...(unread ? { headers: unread } : {}) });
      }
      if (match.kind === 'bad_path') {
        format = match.errorFormat;
        throw new HttpError(400, 'path_invalid', 'the path has an invalid percent-encoding', unread ? { headers: unread } : {});
      }
      if (match.kind === 'method_not_allowed') {
        format = match.errorFormat ?? format;
        const allowed = match.allowed.map((m) => m.toUpperCase());
        if (match.headAllowed) allowed.push('HEAD');
        if (!(cors && request.method === 'OPTIONS')) {
          throw new HttpError(405, 'method_not_allowed', `${request.method} is not allowed on ${request.path}`, {
            headers: { allow: allowed.join(', '), ...unread },
          });
        }
        operation = 'corsPreflight';
        // Its answer (204) has no body, and a bodiless answer cannot close the connection (reply-writer.ts): refused
        // instead, so the body is not read either. Browsers never send one.
        if (unread) throw new HttpError(400, 'body_not_allowed', 'OPTIONS takes no request body', { headers: unread });
        return preflight(request.headers, allowed, match.corsMethods, allowedOrigin);
      }
      const route = match.route;
      operation = route.operationId;
      format = route.errorFormat;
      if (route.rateLimit?.by === 'address') this.#limit(route, `${route.operationId} ${clientBucket(request.remoteAddress)}`);
      const body = await bodyRead!;
      if (state.aborted) return undefined;
      const incoming: IncomingRequest = { ...request, body };
      const principal = await this.#authenticate(route, incoming);
      if (route.rateLimit?.by === 'subject') this.#limit(route, `${route.operationId} ${principal.subject}`);
      const params = validate(route.params, match.params, 'path');
      const query = validate(route.query, parseQuery(request.query), 'query', route.query === undefined, route.handlesUnstorableQuery === true);
      const json = parseBody(route, request.headers, body);
      const payload = validate(route.body, json, 'body', route.body === undefined);
      const execute = async (): Promise<Reply> => {
        try {
          return await this.#execute(route, { params, query, body: payload, headers: request.headers, principal, requestId, logger: log, remoteAddress: request.remoteAddress });
        } catch (error) {
          // Client errors from the handler are results too: an identical retry must see the same refusal.
          if (error instanceof HttpError && error.status < 500) {
            refusedWith = error.code;
            return toStored(renderError(error, format, requestId));
          }
          throw error;
        }
      };
      const key = route.idempotency ? readIdempotencyKey(request.headers, route.idempotency) : undefined;
      if (key === undefined) return await execute();
      const outcome = await runIdempotently(
        this.#options.idempotency,
        // One key space per caller across all operations: the fingerprint covers method and path, so the same key
        // on another operation is a different request (422), as the spec's "changed request" says.
        { scope: principal.subject, key, fingerprint: requestFingerprint(request.method, request.path, request.query, json, readHeaders(route, request.headers)) },
        async () => storable(route, await execute()),
        (error) => log.warn({ err: error, operation: route.operationId }, 'applied result not recorded for its Idempotency-Key'),
      );
      return outcome.replayed ? replayed(outcome, requestId) : outcome;
    };
    let reply: Reply | undefined;
    let fault: Fault | undefined;
    try {
      reply = await dispatch();
    } catch (error) {
      const failure = this.#asHttpError(error);
      refusedWith = failure.code;
      if (failure.status >= 500) fault = faultOf(failure, error);
      reply = toStored(renderError(failure, format, requestId));
    }
    if (state.aborted || reply === undefined) return;
    if (match.kind === 'found') reply = challenged(reply, match.route, request.headers);
    const answer = cors ? withCors(reply, allowedOrigin) : reply;
    const headers: Record<string, string | readonly string[]> = { ...BASE_HEADERS, ...answer.headers, 'x-request-id': requestId };
    const written = writeReply(res, { status: answer.status, headers, body: answer.body, head: request.method === 'HEAD' }, state);
    // Measured to the answer's hand-off, as before: how fast the client reads is not the server's latency.
    const durationMs = performance.now() - started;
    this.#options.observer?.requestCompleted(operation, request.method, answer.status, durationMs);
    const entry = {
      method: request.method,
      path: request.path,
      operation,
      status: answer.status,
      ...(refusedWith === undefined ? {} : { code: refusedWith }),
      durationMs: Math.round(durationMs * 10) / 10,
    };
    if (answer.status >= 500) {
      // With its cause (an HttpError's, such as the Runtime plane's 503 for an outage), once per kind of fault a window.
      const { msg, level, code, cause } = fault ?? { msg: 'request failed', level: 'warn' as const, code: undefined, cause: undefined };
      const details = { ...entry, ...(code === undefined ? {} : { code }), ...(cause === undefined ? {} : { err: cause }) };
      this.#faults.log(log, level, `${msg}\u0000${code ?? answer.status}${level === 'error' ? `\u0000${operation}` : ''}`, details, msg);
    } else log.debug(entry, 'request');
    // Still in flight until the body is out: a drain lets a reply finish rather than cutting it.
    await written;
  }

  /** The request's origin when pages of it may read cross-origin answers; a lookup failure refuses the request (503). */
  /** `runtime`: the route is a Runtime call, whose outages have their own code (an origin this node has not seen yet). */
  async #allowedOrigin(origin: string, runtime: boolean): Promise<string | undefined> {
    try {
      return (await this.#options.corsOrigins?.(origin)) === true ? origin : undefined;
    } catch (error) {
      if (runtime) throw coordinationUnavailable(error);
      throw new HttpError(503, 'storage_unavailable', 'the registry cannot check this origin right now; retry shortly', {
        family: 'coordination',
        headers: { 'retry-after': '2' },
        cause: error,
      });
    }
  }

  #limit(route: AnyRoute, key: string): void {
    const { perMinute, burst } = route.rateLimit!;
    const wait = this.#options.rateLimiter!.take(key, perMinute, burst);
    if (wait > 0) {
      throw new HttpError(429, 'rate_limited', `too many requests for this operation; retry in ${wait} s`, {
        family: 'account_policy',
        headers: { 'retry-after': String(wait) },
      });
    }
  }

  async #authenticate(route: AnyRoute, request: IncomingRequest): Promise<Principal> {
    if (route.credential === 'none') return anonymous;
    const verifier = this.#options.verifiers[route.credential];
    if (!verifier) throw new HttpError(500, 'credential_unverifiable', 'no verifier for this route');
    return verifier(request, { bodyBound: route.bodyBound ?? false, allowPendingDevice: route.allowPendingDevice ?? false, csrf: route.csrf ?? false });
  }

  async #execute(route: AnyRoute, ctx: Parameters<AnyRoute['handler']>[0]): Promise<Reply> {
    const result = await route.handler(ctx);
    const spec = route.responses[result.status];
    if (!spec) throw new Error(`handler of ${route.operationId} answered undeclared status ${result.status}`);
    const headers: Record<string, string | readonly string[]> = { ...(result.headers ?? {}) };
    if (spec.text) {
      if (typeof result.body !== 'string') throw new Error(`handler of ${route.operationId} must answer text`);
      const declared = typeof spec.text.mediaType === 'string' ? [spec.text.mediaType] : spec.text.mediaType;
      const named = headers['content-type'] ?? declared[0];
      if (typeof named !== 'string' || !declared.includes(named)) throw new Error(`handler of ${route.operationId} answered an undeclared media type`);
      return { status: result.status, headers: { ...headers, 'content-type': named }, body: Buffer.from(result.body) };
    }
    if (!spec.schema) return { status: result.status, headers, body: Buffer.alloc(0) };
    headers['content-type'] ??= 'application/json';
    // AnyRoute's body type is too loose to narrow from; as unknown it narrows.
    const body: unknown = result.body;
    if (body instanceof FixedJson) return { status: result.status, headers, body: this.#fixedBody(route, result.status, spec.schema, body) };
    return { status: result.status, headers, body: Buffer.from(JSON.stringify(parseResponse(route, result.status, spec.schema, body))) };
  }

  /** A fixed body's bytes: validated and serialised on first use, the same bytes from then on. */
  #fixedBody(route: AnyRoute, status: number, schema: z.ZodType, fixed: FixedJson<unknown>): Buffer {
    const known = this.#fixedBodies.get(fixed);
    if (known?.schema === schema) return known.bytes;
    const bytes = Buffer.from(JSON.stringify(parseResponse(route, status, schema, fixed.value)));
    this.#fixedBodies.set(fixed, { schema, bytes });
    return bytes;
  }

  /** The error as the client is told it; logged by the caller (with its cause) once the answer is out. */
  #asHttpError(error: unknown): HttpError {
    if (error instanceof HttpError) return error;
    if (error instanceof ActorHostError && error.retryable) {
      return new HttpError(503, error.code, 'the coordination service is briefly unavailable; retry', {
        family: 'coordination',
        headers: { 'retry-after': '1' },
        cause: error,
      });
    }
    if (isStorageOutage(error)) {
      return new HttpError(503, 'storage_unavailable', 'the registry cannot reach its storage right now; retry shortly', {
        family: 'coordination',
        headers: { 'retry-after': '2' },
        cause: error,
      });
    }
    return new HttpError(500, 'internal_error', 'the registry failed to handle this request', { family: 'internal', cause: error });
  }
}

/** A 5xx answer as the log tells it. */
interface Fault {
  readonly msg: string;
  readonly level: 'warn' | 'error';
  readonly code: string;
  readonly cause: unknown;
}

function faultOf(failure: HttpError, thrown: unknown): Fault {
  const cause = failure.cause ?? (failure === thrown ? undefined : thrown);
  if (failure.code === 'internal_error' && failure.cause === thrown) return { msg: 'unhandled error', level: 'error', code: failure.code, cause };
  if (failure.cause instanceof ActorHostError) return { msg: 'actor host refused the request', level: 'warn', code: failure.code, cause };
  if (failure.code === 'storage_unavailable' && cause !== undefined) return { msg: 'storage unavailable', level: 'warn', code: failure.code, cause };
  return { msg: 'request failed', level: failure.status === 500 ? 'error' : 'warn', code: failure.code, cause };
}

/**
 * A CORS preflight of a path with operations pages call cross-origin: allowed for an allowed origin, for those
 * operations' methods and the request headers the API reads. No credentials mode: the Runtime's calls carry bearer
 * tokens, and no cookie may ride along. Without `Origin` and a requested method it is a plain OPTIONS.
 */
function preflight(headers: Readonly<Record<string, string>>, allowed: readonly string[], corsMethods: readonly string[], origin: string | undefined): Reply {
  const allow = allowed.join(', ');
  if (headers.origin === undefined || headers['access-control-request-method'] === undefined) return { status: 204, headers: { allow }, body: '' };
  if (origin === undefined) {
    throw new HttpError(403, 'cors_origin_not_allowed', `${headers.origin.slice(0, 300)} is not the origin of a registered Environment`, { family: 'runtime' });
  }
  const methods = corsMethods.map((m) => m.toUpperCase());
  if (methods.includes('GET')) methods.push('HEAD');
  return {
    status: 204,
    headers: {
      allow,
      'access-control-allow-methods': methods.join(', '),
      'access-control-allow-headers': CORS_ALLOWED_HEADERS,
      'access-control-max-age': String(CORS_MAX_AGE_S),
    },
    body: '',
  };
}

/**
 * RFC 6750 3 (and RFC 9110 11.6.1): every 401 of an operation a bearer opens names the Bearer scheme, whichever
 * check refused it (the credential's verifier, a handler that found the grant ended meanwhile) and whether it was
 * answered now or replayed. Here once, so that no refusal path can forget it; a challenge the refusal names itself
 * (the operator listener's realm) stands.
 */
function challenged(reply: Reply, route: AnyRoute, headers: Readonly<Record<string, string>>): Reply {
  if (reply.status !== 401 || reply.headers['www-authenticate'] !== undefined || !takesBearer(route.credential)) return reply;
  return { ...reply, headers: { ...reply.headers, 'www-authenticate': bearerChallenge(headers) } };
}

/** A reply of a cross-origin operation: names the allowed origin, so the page may read it; varies by origin either way. */
function withCors(reply: Reply, origin: string | undefined): Reply {
  const headers = origin === undefined
    ? { ...reply.headers, vary: 'origin' }
    : { ...reply.headers, 'access-control-allow-origin': origin, 'access-control-expose-headers': CORS_EXPOSED_HEADERS, vary: 'origin' };
  return { ...reply, headers };
}

/** The request headers `route` declares it reads, by lower-case name (absent ones included, as absent). */
function readHeaders(route: AnyRoute, headers: Readonly<Record<string, string>>): Record<string, string | undefined> {
  const read: Record<string, string | undefined> = {};
  for (const name of Object.keys(route.requestHeaders ?? {})) read[name.toLowerCase()] = headers[name.toLowerCase()];
  return read;
}

/** Idempotency records keep single-valued headers: a keyed operation never sets cookies. */
function storable(route: AnyRoute, reply: Reply): StoredResult {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(reply.headers)) {
    if (typeof value !== 'string') throw new Error(`idempotent operation ${route.operationId} answered a repeated header ${name}`);
    headers[name] = value;
  }
  return { status: reply.status, headers, body: Buffer.isBuffer(reply.body) ? reply.body : Buffer.from(reply.body) };
}

/**
 * A stored result replayed, marked `Idempotent-Replayed`. What was created or accepted (201, 202) is replayed as `200`
 * with the same body: the spec's keyed operations answer "`201` appended, `200` replay". A stored refusal keeps its
 * status, code and details, but carries the `requestId` of this request, which is the `X-Request-Id` it is sent with
 * (the stored one belongs to the first request and its log lines).
 */
function replayed(result: StoredResult, requestId: string): StoredResult {
  const headers = { ...result.headers, 'idempotent-replayed': 'true' };
  if (result.status === 201 || result.status === 202) return { ...result, status: 200, headers };
  const type = result.headers['content-type'] ?? '';
  if (result.status < 400 || !/^application\/(problem\+)?json\b/.test(type)) return { ...result, headers };
  const body = JSON.parse(result.body.toString('utf8')) as { requestId?: unknown; error?: { requestId?: unknown } };
  if (typeof body.requestId === 'string') body.requestId = requestId;
  if (body.error && typeof body.error.requestId === 'string') body.error.requestId = requestId;
  return { ...result, headers, body: Buffer.from(JSON.stringify(body)) };
}

/** Parsing (not just checking) the response strips members the schema does not name: internal fields never leak. */
function parseResponse(route: AnyRoute, status: number, schema: z.ZodType, body: unknown): unknown {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new Error(`response of ${route.operationId} (${status}) does not match its schema: ${parsed.error.message}`);
  return parsed.data;
}

function toStored(rendered: ReturnType<typeof renderError>): StoredResult {
  return {
    status: rendered.status,
    headers: { ...rendered.headers, 'content-type': rendered.contentType },
    body: Buffer.from(JSON.stringify(rendered.body)),
  };
}

/** Reads the body under `limit` bytes; refuses early on a declared Content-Length above it. */
function readBody(
  res: HttpResponse,
  headers: Readonly<Record<string, string>>,
  limit: number,
  state: RequestState,
): Promise<Buffer> {
  if (!hasBody(headers)) return Promise.resolve(Buffer.alloc(0));
  const declared = headers['content-length'];
  const tooLarge = (): HttpError =>
    new HttpError(413, 'body_too_large', `the request body exceeds ${limit} bytes`, { headers: { connection: 'close' } });
  // A repeated length reaches here only when every value is the same (framingRefusal).
  if (declared !== undefined && Number(declared.split(',')[0]) > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    // A client gone mid-body sends no more data: without this the request would stay in flight forever (and every
    // drain would wait out its timeout). The caller checks `aborted` right after.
    state.onAbort = () => resolve(Buffer.alloc(0));
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    res.onData((chunk, isLast) => {
      if (refused || state.aborted) return;
      size += chunk.byteLength;
      if (size > limit) {
        refused = true;
        reject(tooLarge());
        return;
      }
      // uWS reuses the chunk's memory after this callback returns: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) resolve(Buffer.concat(chunks, size));
    });
  });
}

function parseQuery(query: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of new URLSearchParams(query)) {
    refuseProtoName(name, 'query');
    // Own members only: `constructor` or `toString` would otherwise find Object.prototype's and become a list.
    const prior = Object.hasOwn(out, name) ? out[name] : undefined;
    out[name] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [prior, value];
  }
  return out;
}

function parseBody(route: AnyRoute, headers: Readonly<Record<string, string>>, body: Buffer): unknown {
  // No body on an operation that takes a JSON object is that object with no members: one whose members are all
  // optional (the spec's empty requests) needs none, and one that requires members names them missing.
  if (body.length === 0) return route.body !== undefined && route.bodyFormat !== 'form' ? {} : undefined;
  if (route.body === undefined) {
    throw new HttpError(400, 'body_not_allowed', `${route.method.toUpperCase()} ${route.path} takes no request body`);
  }
  const type = headers['content-type'];
  if (route.bodyFormat === 'form') return parseForm(type, body);
  if (type === undefined || !JSON_TYPE.test(type)) {
    throw new HttpError(415, 'unsupported_media_type', 'the request body must be application/json (UTF-8)', {
      headers: { accept: 'application/json' },
    });
  }
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw new HttpError(400, 'malformed_json', 'the request body is not valid UTF-8');
  }
  let json: unknown;
  try {
    json = JSON.parse(text) as unknown;
  } catch (error) {
    throw new HttpError(400, 'malformed_json', `the request body is not valid JSON: ${(error as Error).message}`);
  }
  const proto = maySpellProto(text) ? protoMemberAt(json) : undefined;
  if (proto !== undefined) {
    throw new HttpError(400, 'validation_failed', 'the request body did not validate', {
      details: [{ pointer: proto, in: 'body', code: 'unrecognized', message: '`__proto__` is not a member name any request takes' }],
    });
  }
  return json;
}

/** Assigning `__proto__` to a plain object is silently ignored: a parameter of that name would vanish unrefused. */
function refuseProtoName(name: string, part: ErrorDetail['in']): void {
  if (name !== '__proto__') return;
  throw new HttpError(400, 'validation_failed', `the ${part === 'body' ? 'request body' : `${part} parameters`} did not validate`, {
    details: [{ pointer: '/__proto__', in: part, code: 'unrecognized', message: '`__proto__` is not a parameter any request takes' }],
  });
}

const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(?:;\s*charset=(?:utf-8|"utf-8")\s*)?$/i;

function parseForm(type: string | undefined, body: Buffer): Record<string, string> {
  if (type === undefined || !FORM_TYPE.test(type)) {
    throw new HttpError(415, 'unsupported_media_type', 'the request body must be application/x-www-form-urlencoded', {
      headers: { accept: 'application/x-www-form-urlencoded' },
    });
  }
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw new HttpError(400, 'malformed_form', 'the request body is not valid UTF-8');
  }
  const out: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(text)) {
    refuseProtoName(name, 'body');
    // RFC 6749 3.1 and 3.2: a parameter sent twice makes the request invalid, not "the last one wins".
    if (Object.hasOwn(out, name)) throw new HttpError(400, 'form_parameter_repeated', `the form parameter ${name} is repeated`);
    out[name] = value;
  }
  return out;
}

function validate(
  schema: z.ZodType | undefined,
  value: unknown,
  part: ErrorDetail['in'],
  refuseAnything = false,
  /** The route's handler answers unstorable text itself (`handlesUnstorableQuery`). */
  unstorableAllowed = false,
): unknown {
  const where = part === 'body' ? 'request body' : `${part} parameters`;
  const unstorable = unstorableAllowed ? undefined : unstorableTextAt(value);
  if (unstorable !== undefined) {
    throw new HttpError(400, 'validation_failed', `the ${where} did not validate`, { details: [unstorableTextDetail(unstorable, part)] });
  }
  if (schema === undefined) {
    const empty = value === undefined || (typeof value === 'object' && value !== null && Object.keys(value).length === 0);
    if (refuseAnything && !empty) {
      throw new HttpError(400, 'validation_failed', `this operation takes no ${part} parameters`, {
        details: Object.keys(value as object).map((name) => ({ pointer: `/${name}`, in: part, code: 'unrecognized', message: 'not a parameter of this operation' })),
      });
    }
    return value;
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new HttpError(400, 'validation_failed', `the ${where} did not validate`, { details: validationDetails(parsed.error, part) });
}
