import * as z from 'zod';
import { HttpError } from './errors.js';
import type { RequestHeaderSpec } from './route.js';
/**
 * Every credential the API names. A route declares exactly one; the gateway refuses to start with a route whose
 * credential has no verifier, so no route is ever served unauthenticated by omission.
 */
export const credentialKinds = [
  'none',
  'deviceAssertion',
  'managementBearer',
  'developerSession',
  'reviewHostCapability',
  'projectToken',
  'appSession',
  'runtimeToken',
  'runtimeSession',
  'runtimeActivation',
  'runtimeActive',
  'controlToken',
  'environmentBackendGrant',
  'operator',
  'managementIdentity',
  'pageSession',
] as const;

export type CredentialKind = (typeof credentialKinds)[number];

/**
 * Who sent a request, as established by the route's credential. `subject` is the caller's stable identity for scoping
 * (idempotency records, rate limits); `anonymous` for `none`.
 */
export type Principal =
  | { readonly credential: 'none'; readonly subject: 'anonymous' }
  | {
      readonly credential: 'deviceAssertion';
      readonly subject: string;
      readonly accountId: string;
      readonly deviceId: string;
      readonly deviceStatus: 'active' | 'pending';
      /**
       * The account epoch read together with the device's status: what anything issued for this device is bound to, so
       * a removal that commits after the check (it raises the epoch) still ends it. A later read could miss that.
       */
      readonly accountEpoch: number;
    }
  | {
      /** A CLI or desktop management bearer (a grant's access token) or a console session cookie. */
      readonly credential: 'managementBearer' | 'developerSession';
      readonly subject: string;
      readonly accountId: string;
      /** The management grant behind the bearer, or the one the console session was exchanged from. */
      readonly grantId: string;
      readonly scopes: readonly string[];
      /** Console sessions only: the session and the browser it lives in. */
      readonly sessionId?: string;
      readonly browserId?: string;
    }
  | {
      readonly credential: 'pageSession';
      readonly subject: string;
      readonly accountId: string;
      readonly sessionId: string;
      readonly browserId: string;
      readonly accountEpoch: number;
      /** When the page session began: the person's sign-in time. */
      readonly signedInAt: number;
    }
  | {
      /** A device assertion together with a review host capability issued to that device. */
      readonly credential: 'reviewHostCapability';
      readonly subject: string;
      readonly accountId: string;
      readonly deviceId: string;
      /**
       * Null when the registry no longer holds the capability sent (swept a day after it ended; a never-issued one of
       * the same form looks alike): the account and device are then the assertion's.
       */
      readonly capabilityId: string | null;
      /** False once released, revoked, expired or swept: only releasing accepts such a capability. */
      readonly capabilityLive: boolean;
    }
  | {
      /** A runtime access token, sent from the Environment's `Origin`, before any Runtime session exists. */
      readonly credential: 'runtimeToken';
      readonly subject: string;
      readonly caller: RuntimeCaller;
    }
  | {
      /** The token plus `X-Platform-Runtime-Session` naming a live (standby, active or superseded) session of the caller. */
      readonly credential: 'runtimeSession';
      readonly subject: string;
      readonly caller: RuntimeCaller;
      readonly sessionId: string;
    }
  | {
      /**
       * The token plus `X-Platform-Runtime-Session`, the session not yet looked up: the activation checks it itself,
       * after the eviction quota, so that a refusal over the quota touches no coordination state.
       */
      readonly credential: 'runtimeActivation';
      readonly subject: string;
      readonly caller: RuntimeCaller;
      readonly sessionId: string;
    }
  | {
      /** The session plus the current lease of its principal (`X-Platform-Runtime-Lease` and `-Lease-Version`). */
      readonly credential: 'runtimeActive';
      readonly subject: string;
      readonly caller: RuntimeCaller;
      readonly sessionId: string;
      readonly lease: { readonly id: string; readonly version: number };
      /**
       * For a write the lease fences outside the actors (Plugin settings), once it holds its connection and locks:
       * enters the person's turn and checks this fence again (throwing what the credential check would: 409
       * `runtime_session_superseded`, `runtime_lease_stale`, …); call the returned function after the commit. No
       * activation moves the lease in between (RuntimeSessions.holdLease).
       */
      readonly holdFence: () => Promise<() => void>;
    }
  | {
      readonly credential: Exclude<
        CredentialKind,
        | 'none'
        | 'deviceAssertion'
        | 'managementBearer'
        | 'developerSession'
        | 'pageSession'
        | 'reviewHostCapability'
        | 'runtimeToken'
        | 'runtimeSession'
        | 'runtimeActivation'
        | 'runtimeActive'
      >;
      readonly subject: string;
    };

/**
 * Who calls the Runtime plane: a person's account inside one Environment, established from a runtime access token
 * issued to that Environment's OIDC client and the `Origin` it was sent from. `subject` of a runtime principal is the
 * account id (rate limits and quotas bind to the private principal); Environments only ever see `actorId`.
 */
export interface RuntimeCaller {
  readonly accountId: string;
  /** The pairwise actor id of the account in this Environment (`act_…`): the only identity Environments see. */
  readonly actorId: string;
  readonly environmentId: string;
  /** The exact `Origin` the request came from: the Environment's registered origin or `platform-env://{environmentId}`. */
  readonly origin: string;
  /** The OAuth grant behind the token; ends at logout, expiry or revocation. */
  readonly grantId: string;
  /** The browser the grant was issued in (for browser SSO logout); null for grants not made in a registry browser. */
  readonly browserId: string | null;
}

/**
 * Narrows a handler's principal to the credentials its route declares. Any other principal means the route table
 * and the handler disagree: a wiring bug, never a client's mistake.
 */
export function principalAs<C extends Principal['credential']>(principal: Principal, ...credentials: readonly C[]): Extract<Principal, { credential: C }> {
  if (!(credentials as readonly string[]).includes(principal.credential)) {
    throw new Error(`route requires ${credentials.join(' or ')}, got ${principal.credential}`);
  }
  return principal as Extract<Principal, { credential: C }>;
}

/** What a route asks of its credential beyond its kind. */
export interface CredentialRequirements {
  /** The credential must cover the exact body (device assertions carry its SHA-256). */
  readonly bodyBound: boolean;
  /** A device whose enrolment is not complete may call (only enrolment completion does). */
  readonly allowPendingDevice: boolean;
  /** Cookie callers must present the session's CSRF token. */
  readonly csrf: boolean;
}

export interface IncomingRequest {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly remoteAddress: string;
  readonly body: Buffer;
}

/** Establishes the principal or throws an HttpError (401/403) naming why. */
export type CredentialVerifier = (request: IncomingRequest, requirements: CredentialRequirements) => Promise<Principal> | Principal;

export type CredentialVerifiers = Partial<Record<CredentialKind, CredentialVerifier>>;

export const anonymous: Principal = Object.freeze({ credential: 'none', subject: 'anonymous' } as const);

/** How each credential is presented, as OpenAPI security schemes. Designs of later issues refine the descriptions. */
export const credentialSchemes: Readonly<Record<Exclude<CredentialKind, 'none' | 'managementIdentity'>, Readonly<Record<string, string>>>> = {
  deviceAssertion: {
    type: 'apiKey',
    in: 'header',
    name: 'Platform-Device-Assertion',
    description: 'JWS signed by an enrolled device key over the method, path, query, time, a unique id and, where required, the body digest.',
  },
  managementBearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Console or CLI management session.' },
  developerSession: {
    type: 'apiKey',
    in: 'cookie',
    name: '__Host-registry_console',
    description:
      'Browser developer session from `POST /v1/auth/console-session`. Operations marked CSRF also need the header `X-CSRF-Token` with the `csrfToken` of that response.',
  },
  pageSession: {
    type: 'apiKey',
    in: 'cookie',
    name: '__Host-registry_page',
    description: 'Registry page session from `POST /v1/account/page-session` (HttpOnly, SameSite=Lax), used by registry pages such as the OIDC authorization page.',
  },
  reviewHostCapability: {
    type: 'apiKey',
    in: 'header',
    name: 'Platform-Review-Capability',
    description:
      'Short-lived (15 minutes), fixed-purpose capability from `POST /v1/review/host-capabilities`, issued to one enrolled device; always sent together with that device\'s body-bound `Platform-Device-Assertion`.',
  },
  projectToken: { type: 'http', scheme: 'bearer', description: 'Project token with scopes and a required expiry.' },
  appSession: { type: 'http', scheme: 'bearer', description: 'App-audience session from the launch-code exchange.' },
  runtimeToken: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'Runtime access token (audience `registry-runtime`) from the OIDC flow of an Environment client, sent with that Environment\'s `Origin`.',
  },
  runtimeSession: { type: 'http', scheme: 'bearer', description: 'Runtime access token plus `Origin` and `X-Platform-Runtime-Session`.' },
  runtimeActivation: {
    type: 'http',
    scheme: 'bearer',
    description: 'Runtime access token plus `Origin` and `X-Platform-Runtime-Session`; the session is checked after the eviction quota.',
  },
  runtimeActive: {
    type: 'http',
    scheme: 'bearer',
    description: 'Runtime access token plus `Origin`, `X-Platform-Runtime-Session`, `X-Platform-Runtime-Lease` and `X-Platform-Runtime-Lease-Version`.',
  },
  controlToken: { type: 'http', scheme: 'bearer', description: 'Read-only, origin-bound control token.' },
  environmentBackendGrant: { type: 'http', scheme: 'bearer', description: 'Short-lived exact-endpoint Environment Backend Grant.' },
  operator: { type: 'http', scheme: 'bearer', description: 'Operator listener token (`OPS_TOKEN`); the listener is bound to loopback by default.' },
};

/**
 * Credentials made of others, as OpenAPI security requirements: each inner list is one requirement whose schemes are
 * all needed; the outer list is a choice. A credential not listed is its own single scheme.
 */
export const credentialRequirements: Partial<Readonly<Record<CredentialKind, readonly (readonly CredentialKind[])[]>>> = {
  managementIdentity: [['managementBearer'], ['developerSession']],
  reviewHostCapability: [['deviceAssertion', 'reviewHostCapability']],
};

/** Credentials whose refusals are Runtime (Problem) failures whatever the route's validation format. */
export const runtimeCredentials: ReadonlySet<CredentialKind> = new Set(['runtimeToken', 'runtimeSession', 'runtimeActivation', 'runtimeActive', 'controlToken', 'environmentBackendGrant']);

/**
 * The Runtime plane fails closed: when the stores that say who holds a lease (or whether a token's grant is live, or
 * whether a page's origin is registered) cannot answer, nobody is admitted, and the caller is told so with the one code
 * the spec gives for it.
 */
export function coordinationUnavailable(cause: unknown): HttpError {
  return new HttpError(503, 'runtime_coordination_unavailable', 'runtime coordination is unavailable; nobody can be admitted until it returns, retry shortly', {
    family: 'coordination',
    headers: { 'retry-after': '2' },
    cause,
  });
}

// RFC 9110 11.1: the scheme is a case-insensitive token (`bearer`, `BEARER`), followed by one or more spaces.
const BEARER = /^Bearer +([A-Za-z0-9._~+/-]+=*)$/i;

/** The token of an `Authorization: Bearer` header (RFC 6750 token68); undefined when there is none. */
export function bearerToken(headers: Readonly<Record<string, string>>): string | undefined {
  return BEARER.exec(headers.authorization ?? '')?.[1];
}

/** Whether an operation taking this credential is opened by an `Authorization: Bearer` token (alone or as one choice). */
export function takesBearer(credential: CredentialKind): boolean {
  if (credential === 'none') return false;
  return (credentialRequirements[credential] ?? [[credential]]).some((all) =>
    all.some((kind) => kind !== 'none' && kind !== 'managementIdentity' && credentialSchemes[kind].scheme === 'bearer'),
  );
}

/**
 * RFC 6750 3: the challenge of a 401 refusing a request to an operation a bearer opens. `error="invalid_token"` when a
 * bearer was sent and refused; none when the request carried no bearer ("SHOULD NOT include an error code").
 * `bearer`: the token the request presented, where that is not its `Authorization` header (a WebSocket upgrade offers
 * it as a subprotocol).
 */
export function bearerChallenge(headers: Readonly<Record<string, string>>, bearer: string | undefined = bearerToken(headers)): string {
  return bearer === undefined ? 'Bearer realm="registry"' : 'Bearer realm="registry", error="invalid_token"';
}

/** A lease version as it travels in headers and query strings: a positive integer. */
export const LEASE_VERSION = /^[1-9][0-9]{0,15}$/;

const originHeader = { description: "The Environment page's origin: its registered origin, or `platform-env://{environmentId}` in the desktop shell.", required: true, schema: z.string() };
const sessionHeader = { description: 'The Runtime session (`rts_…`) this call belongs to.', required: true, schema: z.string() };
const activeHeaders: Array<[string, RequestHeaderSpec]> = [
  ['Origin', originHeader],
  ['X-Platform-Runtime-Session', sessionHeader],
  ['X-Platform-Runtime-Lease', { description: 'The lease id the session was given by its last activation.', required: true, schema: z.string() }],
  ['X-Platform-Runtime-Lease-Version', { description: 'The version of that lease.', required: true, schema: z.string().regex(LEASE_VERSION) }],
];

/** Request headers a credential consists of besides its security scheme: documented on every operation using it. */
export const credentialHeaders: Partial<Readonly<Record<CredentialKind, ReadonlyArray<readonly [string, RequestHeaderSpec]>>>> = {
  runtimeToken: [['Origin', originHeader]],
  runtimeSession: activeHeaders.slice(0, 2),
  runtimeActivation: activeHeaders.slice(0, 2),
  runtimeActive: activeHeaders,
};
