import type * as z from 'zod';
import type { Logger } from 'pino';
import type { ErrorFormat } from './errors.js';
import type { Principal } from './credentials.js';
import type { CredentialKind } from './credentials.js';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface ResponseSpec {
  readonly description: string;
  /** JSON body schema; must be a registered API schema (it becomes a component of the OpenAPI document). */
  readonly schema?: z.ZodType;
  /**
   * A non-JSON body (for example Prometheus text): the handler returns it as a string, sent as this media type. With
   * several (documents of different kinds at one path), the handler names its body's in a `content-type` header.
   */
  readonly text?: { readonly mediaType: string | readonly [string, ...string[]] };
  readonly headers?: Readonly<Record<string, { readonly description: string; readonly schema: z.ZodType }>>;
}

type Responses = Readonly<Record<number, ResponseSpec>>;

/** A request header an operation reads (beyond those its credential implies), for the API description. */
export interface RequestHeaderSpec {
  readonly description: string;
  readonly required: boolean;
  readonly schema: z.ZodType;
}

type BodyOf<S extends ResponseSpec> = S['schema'] extends z.ZodType
  ? z.input<S['schema']> | FixedJson<z.input<S['schema']>>
  : S['text'] extends { mediaType: unknown }
    ? string
    : undefined;

/**
 * A JSON body that does not change once built (the OpenAPI document, about 200 KB): the gateway validates and
 * serialises it the first time it is sent and sends the same bytes from then on, instead of doing both per request.
 * The value is deep-frozen, so "does not change" is enforced rather than hoped for.
 */
export class FixedJson<T> {
  readonly value: T;
  constructor(value: T) {
    this.value = deepFreeze(value);
  }
}

/** Freezes every object reachable from `value`; `seen` rather than isFrozen, since a frozen object may hold unfrozen ones. */
function deepFreeze<T>(value: T, seen = new WeakSet<object>()): T {
  if (typeof value === 'object' && value !== null && !seen.has(value)) {
    seen.add(value);
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member, seen);
  }
  return value;
}

/** What a handler may return: one of the declared statuses with a body of that status's schema. */
export type RouteResult<R extends Responses> = {
  [S in keyof R & number]: {
    readonly status: S;
    readonly body: BodyOf<R[S]>;
    /** `set-cookie` may repeat: give it a list. */
    readonly headers?: Readonly<Record<string, string | readonly string[]>>;
  };
}[keyof R & number];

export interface RouteContext<P, Q, B> {
  readonly params: P;
  readonly query: Q;
  readonly body: B;
  /** Request headers, names lower-case. */
  readonly headers: Readonly<Record<string, string>>;
  readonly principal: Principal;
  readonly requestId: string;
  readonly logger: Logger;
  readonly remoteAddress: string;
}

type Infer<T> = T extends z.ZodType ? z.output<T> : undefined;

/**
 * One row of the route table. The same object drives request validation, the handler's types and the route's entry in
 * the OpenAPI document, so the three cannot drift apart.
 */
export interface RouteSpec<
  PS extends z.ZodType | undefined = z.ZodType | undefined,
  QS extends z.ZodType | undefined = z.ZodType | undefined,
  BS extends z.ZodType | undefined = z.ZodType | undefined,
  R extends Responses = Responses,
> {
  readonly operationId: string;
  readonly method: HttpMethod;
  /** OpenAPI-style template: `/v1/things/{thingId}`. */
  readonly path: string;
  readonly summary: string;
  readonly description?: string;
  readonly tags: readonly string[];
  readonly credential: CredentialKind;
  /** The credential must cover the exact body (for operations whose body is the intent, e.g. enrolment proofs). */
  readonly bodyBound?: boolean;
  /** Callable by a device whose enrolment is not complete (enrolment completion only). */
  readonly allowPendingDevice?: boolean;
  /** A caller authenticated by a session cookie must also send the session's CSRF token (`X-CSRF-Token`). */
  readonly csrf?: boolean;
  /**
   * Called cross-origin by pages of registered Environments (the Runtime's browser calls, and the token endpoint their
   * public OIDC clients exchange codes at): the gateway answers their CORS preflight and names an allowed `Origin` in
   * every response, so the page may read it. Bearer credentials (or none) only: no cookie is ever allowed to ride along.
   */
  readonly cors?: boolean;
  /** Body format of this route's validation errors; runtime, fencing and coordination failures are always Problems. */
  readonly errorFormat: ErrorFormat;
  readonly params?: PS;
  readonly query?: QS;
  /**
   * The handler answers query parameters holding text Postgres cannot keep (see storage/storable-text.ts) itself,
   * instead of the gateway's 400 `validation_failed`: for an operation whose refusals take a form of their own (the
   * OIDC authorization endpoint sends them back to the client's redirect URI). Such a handler must let none of that
   * text reach a statement; parameters the query schema does not name are dropped before it runs.
   */
  readonly handlesUnstorableQuery?: boolean;
  /** Request body schema; a route without one refuses a non-empty body. */
  readonly body?: BS;
  /**
   * How the body is encoded: JSON (the default) or `application/x-www-form-urlencoded` (OAuth's token endpoint and
   * HTML form posts), which parses to an object of strings; a repeated form parameter is refused.
   */
  readonly bodyFormat?: 'json' | 'form';
  readonly maxBodyBytes?: number;
  /** Request headers the handler reads (e.g. `If-Match`); the handler checks them and says what is wrong. */
  readonly requestHeaders?: Readonly<Record<string, RequestHeaderSpec>>;
  /**
   * Requests per minute per caller (`by: 'subject'`, after authentication) or per client address (`by: 'address'`,
   * before any other work: for unauthenticated operations). Over it: 429 `rate_limited` with Retry-After.
   */
  readonly rateLimit?: { readonly perMinute: number; readonly burst: number; readonly by: 'address' | 'subject' };
  readonly idempotency?: 'required' | 'optional';
  /**
   * A GET operation answers HEAD too (RFC 9110 9.3.2: GET without the body) unless this is false: for a GET with
   * effects (the authorization endpoint issues codes), which HEAD, a safe method, must not run; it is refused 405.
   */
  readonly answersHead?: boolean;
  /** Served while the node drains (status reads a load balancer polls); every other route answers 503 then. */
  readonly servesWhileDraining?: boolean;
  readonly responses: R;
  /** Error statuses the handler itself may produce, besides those the gateway adds (400, 413, 415, 500, 503 …). */
  readonly errors?: readonly number[];
  readonly handler: (ctx: RouteContext<Infer<PS>, Infer<QS>, Infer<BS>>) => Promise<RouteResult<NoInfer<R>>>;
}

export type AnyRoute = RouteSpec<z.ZodType | undefined, z.ZodType | undefined, z.ZodType | undefined, Responses>;

export function defineRoute<
  PS extends z.ZodType | undefined = undefined,
  QS extends z.ZodType | undefined = undefined,
  BS extends z.ZodType | undefined = undefined,
  R extends Responses = Responses,
>(spec: RouteSpec<PS, QS, BS, R>): AnyRoute {
  return Object.freeze(spec) as unknown as AnyRoute;
}
