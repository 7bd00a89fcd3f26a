import * as z from 'zod';
import { apiSchemas } from './api-schemas.js';
import { credentialHeaders, credentialRequirements, credentialSchemes, runtimeCredentials, takesBearer, type CredentialKind } from './credentials.js';
import { MAX_ERROR_DETAILS, statusTitle } from './errors.js';
import type { AnyRoute, RequestHeaderSpec } from './route.js';
import { REPLAY_GUARD_PER_DEVICE } from '../../identity/device-assertion.js';

export const API_VERSION = '0.1.0-alpha.7';

type Json = Record<string, unknown>;

export interface OpenApiOptions {
  readonly serverUrl: string;
  readonly tags: Readonly<Record<string, string>>;
  /**
   * Limits the description states, as this server applies them (IDEMPOTENCY_RETENTION_SECONDS,
   * DEVICE_ASSERTIONS_PER_DEVICE): a client reads the document, not the server's configuration. Defaults when absent.
   */
  readonly limits?: { readonly idempotencyRetentionSeconds: number; readonly deviceAssertionsPerDevice: number };
}

/** The server's defaults (server/config.ts), read when a document is built. */
const defaultLimits = (): NonNullable<OpenApiOptions['limits']> => ({ idempotencyRetentionSeconds: 24 * 3600, deviceAssertionsPerDevice: REPLAY_GUARD_PER_DEVICE });

/** `24 hours`, `1 hour`, `90 minutes`, `45 seconds`: the largest unit the duration is a whole number of. */
function duration(seconds: number): string {
  const [count, unit] = seconds % 3600 === 0 ? [seconds / 3600, 'hour'] : seconds % 60 === 0 ? [seconds / 60, 'minute'] : [seconds, 'second'];
  return `${count} ${unit}${count === 1 ? '' : 's'}`;
}

const description = (limits: NonNullable<OpenApiOptions['limits']>): string => `Public \`/v1\` API of the registry service.

**Errors.** Runtime authorization, account-policy, fencing and coordination failures use a flat RFC 7807
\`application/problem+json\` body (\`Problem\`); validation, catalog and management failures use the nested
\`application/json\` \`ApiError\` body. The status, enrolment, device and management-session operations (up to
\`POST /v1/auth/logout\`) answer every error as a Problem; the token endpoint answers RFC 6749 error bodies
(\`OAuthError\`) with the same \`code\` and \`requestId\`. Each error carries a stable machine \`code\` and a \`requestId\`, also sent as the
\`X-Request-Id\` header of every response. A malformed body is \`400 malformed_json\`, an unknown member or parameter
\`400 validation_failed\` (with \`errors\`/\`details\` naming each one by JSON Pointer, the first ${MAX_ERROR_DETAILS} of them), as is any string or member
name holding U+0000 or an unpaired UTF-16 surrogate, in path, query or body (detail code \`unstorable_text\`), a body over the limit
\`413 body_too_large\`, a non-JSON body \`415 unsupported_media_type\`, an unknown route \`404 route_not_found\`. A request whose framing
is ambiguous (\`Content-Length\` values that differ, a \`Transfer-Encoding\` other than \`chunked\`) is \`400\`
(\`content_length_invalid\`, \`transfer_coding_invalid\`, \`transfer_coding_unsupported\`) and its connection closed.
A \`503\` (\`Retry-After\` set) means the request was not applied and may be retried.

**Cross-origin calls.** The Runtime's browser calls (the Runtime operations taking a runtime token or session) and
the token endpoint (\`POST /v1/oidc/token\`, where an Environment page exchanges its code) are
made by pages of registered Environments, from the Environment's origin or its desktop world
\`platform-env://{environmentId}\`. For those origins the CORS preflight (\`OPTIONS\`) is answered \`204\`, and every
response names the origin in \`Access-Control-Allow-Origin\` and exposes \`ETag\`, \`Retry-After\`, \`X-Request-Id\`,
\`Idempotent-Replayed\` and \`WWW-Authenticate\`; any other origin's preflight is \`403 cors_origin_not_allowed\`.
Bearer tokens only: credentials mode (cookies) is never allowed.

**Runtime credentials.** Runtime operations take a runtime access token (\`Authorization: Bearer\`, checked online on
every call: its sign-in live, its account epoch current) with the page's \`Origin\`; session-bound operations add
\`X-Platform-Runtime-Session\`, active-only ones \`X-Platform-Runtime-Lease\` and \`X-Platform-Runtime-Lease-Version\`.
Their refusals are Problems: \`401 runtime_token_invalid\` (no bearer, or not a runtime access token),
\`401 runtime_authorization_expired\` (expired, or its sign-in ended: logout, revocation, a raised account epoch; sign
in again), \`403 insufficient_scope\` (a sign-in granted without \`runtime\`), \`400 runtime_origin_required\`,
\`403 runtime_origin_mismatch\`, \`400 runtime_session_required\`, \`404 runtime_session_not_found\` (unknown, or
another person's or Environment's), \`409 runtime_session_standby\` (activate it first),
\`409 runtime_session_superseded\` (another Runtime of the person took the lease), \`409 runtime_session_ended\`
(released, revoked or idled out), \`400 runtime_lease_required\` (an active session's call without its lease headers,
or with malformed ones), \`409 runtime_lease_stale\` (a lease that is no longer current) and, when the stores that
say who holds a lease cannot answer, \`503 runtime_coordination_unavailable\` with \`Retry-After\`: nobody is admitted.
A standby or superseded session gets its state's code whether or not it sends lease headers.

**Idempotency.** Operations that take an \`Idempotency-Key\` (16 to 128 characters of \`A-Z a-z 0-9 . _ ~ -\`)
run at most once per caller and key for ${duration(limits.idempotencyRetentionSeconds)}: an identical retry (same method, path, query and JSON body) replays
the original body with \`Idempotent-Replayed: true\`, under \`200\` when the original was \`201\` or \`202\` and under
the original status otherwise; a different request under the same key is refused with
\`422 idempotency_key_reused\`; a retry while the first is still running gets \`409 idempotency_request_in_progress\`.
Server failures (5xx) and refusals that say when to retry (\`429\`, or any with \`Retry-After\`) are not recorded, so
their retry runs again. Request headers an operation reads (\`If-Match\`) are part of the request.

**Device assertion** (\`Platform-Device-Assertion\`): a compact ES256 JWS made with the enrolled device key, protected
header \`{"alg":"ES256","typ":"device-assertion+jwt","kid":"<deviceId>"}\`, payload \`htm\` (method), \`htu\` (path
and query exactly as sent), \`iat\` (seconds; within 60 s of the server's clock), \`jti\` (16 to 64 characters,
single use) and, on body-bound operations, \`bdh\` (base64url SHA-256 of the exact body). Refusals are 401 Problems:
\`device_assertion_required\`, \`device_assertion_invalid\`, \`device_assertion_mismatch\`, \`device_assertion_expired\`,
\`device_assertion_replayed\`, \`device_assertion_body_mismatch\`, \`device_unknown\`, \`device_removed\`,
\`device_not_enrolled\`. No bearer of any kind is accepted where a device assertion is required. Each used \`jti\` is
remembered until it leaves its window (\`iat\` + 60 s), and a device may hold ${limits.deviceAssertionsPerDevice.toLocaleString('en-US')} of them at once${
  limits.deviceAssertionsPerDevice >= 60 ? ` (${Math.floor(limits.deviceAssertionsPerDevice / 60)} requests a
second sustained)` : ''}: past that, that device alone is refused \`429 device_assertion_quota_exceeded\` (Problem) with
\`Retry-After\` (seconds until its earliest id leaves the window); other devices are not affected. Past 1,000,000 ids
held by all devices together (a memory backstop) every device gets \`503 replay_guard_full\` with \`Retry-After: 1\`.

**Bearer refusals** (RFC 6750 3): every \`401\` of an operation a bearer opens (alone or as one choice, like the
management identity) carries \`WWW-Authenticate: Bearer realm="registry"\`, with \`error="invalid_token"\` added when
the request sent a bearer that was refused (invalid, expired, revoked, of an older account epoch).

**Passport**: an ES256 JWT (\`typ\` \`passport+jwt\`, audience \`registry\`, 30 days) naming the account (\`sub\`), the
device (\`dev\`) and the account epoch (\`aep\`), verifiable offline with \`/v1/auth/jwks\`. Removing a device, revoking
the others or signing out raises the account epoch; passports, page and console sessions, OAuth codes, access and
refresh tokens issued under an older epoch stop working online (\`account_epoch_stale\`).

**Sessions and CSRF**: \`POST /v1/account/page-session\` sets the HttpOnly cookie \`__Host-registry_page\` (SameSite=Lax,
12 hours) used by registry pages; \`POST /v1/auth/console-session\` sets \`__Host-registry_console\` (SameSite=Strict,
8 hours at most, never beyond its management session) and returns the \`csrfToken\` that cookie callers send as
\`X-CSRF-Token\` on operations marked CSRF (\`csrf_required\`, \`csrf_invalid\`: 403). The cookie
\`__Host-registry_browser\` names the browser; browser SSO logout ends every page and console session of that browser
and the Environment grants authorized through it, while CLI and desktop management sessions stay.

**OIDC** (discovery at \`/.well-known/openid-configuration\`): Authorization Code with PKCE, \`S256\` only, for public
clients (no secret). Codes are single use and live 60 seconds. Environment clients redirect only to their exact
registered URIs on the Environment's origin, get scope \`openid runtime\`, 10-minute access tokens for audience
\`registry-runtime\` and ID tokens whose \`sub\` is the pairwise actor id (\`auth_time\` only when the request named
\`max_age\`); they renew with \`prompt=none\`. The CLI client \`registry-cli\` redirects to
\`http://127.0.0.1:{any port}/callback\` or \`http://[::1]:{any port}/callback\` (RFC 8252 7.3: only the port may
vary; another path is an unregistered redirect URI), gets scope
\`openid management\`, 10-minute access tokens for audience \`registry-management\` and single-use refresh tokens that
rotate inside a 30-day sign-in; presenting a spent one revokes the whole sign-in (\`refresh_token_reused\`), save one
retry of a refresh whose reply was lost, shortly after it (the token endpoint states the grace).`;

/** Builds the OpenAPI 3.1.0 document from the route table and the registered schemas. */
export function buildOpenApiDocument(routes: readonly AnyRoute[], options: OpenApiOptions): Json {
  const schemas = componentSchemas();
  const usedSchemes = new Set<string>();
  const usedTags = new Set<string>();
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    route.tags.forEach((t) => usedTags.add(t));
    securityOf(route.credential).flat().forEach((kind) => usedSchemes.add(kind));
    const item = (paths[route.path] ??= {});
    item[route.method] = operation(route);
  }
  const document: Json = {
    openapi: '3.1.0',
    info: {
      title: 'Registry Platform API',
      version: API_VERSION,
      description: description(options.limits ?? defaultLimits()),
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: options.serverUrl }],
    tags: [...usedTags].sort().map((name) => ({ name, description: options.tags[name] ?? name })),
    paths,
    components: {
      schemas,
      headers: {
        RequestId: { description: 'Identifier of this request, also in error bodies.', schema: { type: 'string' } },
        RetryAfter: { description: 'Seconds after which a retry is reasonable.', schema: { type: 'integer' } },
        CurrentETag: { description: 'The current tag of the resource, which `If-Match` did not name.', schema: { type: 'string' } },
        BearerChallenge: {
          description: '`Bearer realm="registry"`, with `error="invalid_token"` when a bearer was sent and refused (RFC 6750 3).',
          schema: { type: 'string' },
        },
        IdempotentReplayed: { description: '`true` when this is the stored result of an earlier identical request.', schema: { type: 'string', enum: ['true'] } },
      },
      parameters: {
        IdempotencyKey: idempotencyKeyParameter(false),
        // A reference cannot say `required`, and an operation refusing a request without the key must: a second one.
        IdempotencyKeyRequired: idempotencyKeyParameter(true),
      },
      securitySchemes: Object.fromEntries(
        [...usedSchemes].sort().map((kind) => [kind, credentialSchemes[kind as keyof typeof credentialSchemes]]),
      ),
    },
  };
  return pruneUnusedComponents(document);
}

function componentSchemas(): Record<string, Json> {
  const { schemas } = z.toJSONSchema(apiSchemas, {
    target: 'draft-2020-12',
    io: 'output',
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, Json> };
  for (const schema of Object.values(schemas)) {
    delete schema.$schema;
    delete schema.$id;
    tidy(schema);
  }
  return schemas;
}

/** zod spells ISO timestamps as a long regex beside `format: date-time`; the format says it better. */
function tidy(node: unknown): void {
  if (Array.isArray(node)) return node.forEach(tidy);
  if (node === null || typeof node !== 'object') return;
  const record = node as Json;
  if (record.format === 'date-time') delete record.pattern;
  if (record.maximum === Number.MAX_SAFE_INTEGER) delete record.maximum;
  if (record.minimum === Number.MIN_SAFE_INTEGER) delete record.minimum;
  Object.values(record).forEach(tidy);
}

function ref(schema: z.ZodType, where: string): Json {
  const id = apiSchemas.get(schema)?.id;
  if (!id) throw new Error(`${where}: body schemas must be registered with apiSchema()`);
  return { $ref: `#/components/schemas/${id}` };
}

function idempotencyKeyParameter(required: boolean): Json {
  return {
    name: 'Idempotency-Key',
    in: 'header',
    required,
    description: 'Caller-chosen key making a retry of this request safe.',
    schema: { type: 'string', minLength: 16, maxLength: 128, pattern: '^[A-Za-z0-9._~-]+$' },
  };
}

function operation(route: AnyRoute): Json {
  const where = `${route.method.toUpperCase()} ${route.path}`;
  const parameters: Json[] = [...objectParameters(route.params, 'path'), ...objectParameters(route.query, 'query')];
  if (route.idempotency) {
    parameters.push({ $ref: `#/components/parameters/${route.idempotency === 'required' ? 'IdempotencyKeyRequired' : 'IdempotencyKey'}` });
  }
  for (const [name, header] of [...(credentialHeaders[route.credential] ?? []), ...Object.entries(route.requestHeaders ?? {})] as Array<[string, RequestHeaderSpec]>) {
    parameters.push({ name, in: 'header', required: header.required, description: header.description, schema: inline(header.schema) });
  }
  const responses: Record<string, Json> = {};
  for (const [status, spec] of Object.entries(route.responses)) {
    const headers: Json = { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } };
    if (route.idempotency) headers['Idempotent-Replayed'] = { $ref: '#/components/headers/IdempotentReplayed' };
    for (const [name, h] of Object.entries(spec.headers ?? {})) {
      headers[name] = { description: h.description, schema: inline(h.schema) };
    }
    responses[status] = {
      description: spec.description,
      headers,
      ...(spec.schema ? { content: { 'application/json': { schema: ref(spec.schema, where) } } } : {}),
      ...(spec.text ? { content: Object.fromEntries([spec.text.mediaType].flat().map((type) => [type, { schema: { type: 'string' } }])) } : {}),
    };
  }
  // The replay of a keyed creation or acceptance is a 200 with the original body (see the gateway's `replayed`).
  const created = route.idempotency ? (responses['201'] ?? responses['202']) : undefined;
  if (created) responses['200'] ??= { ...created, description: 'An identical retry: the original result, replayed (`Idempotent-Replayed: true`).' };
  for (const status of errorStatuses(route)) {
    const generic = errorResponse(route, status);
    const own = responses[String(status)] as Json | undefined;
    // A route's own page for an error status (the authorization page's HTML) does not replace the gateway's errors
    // on that status (a malformed query is still a Problem): the document lists both media types, and the headers
    // either sends (Retry-After on every 503, /ready's own included).
    responses[String(status)] = own
      ? {
          ...own,
          headers: { ...(generic.headers as Json), ...((own.headers as Json | undefined) ?? {}) },
          content: { ...(generic.content as Json), ...((own.content as Json | undefined) ?? {}) },
        }
      : generic;
  }
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: [...route.tags],
    security: securityOf(route.credential).map((all) => Object.fromEntries(all.map((kind) => [kind, []]))),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.body
      ? {
          requestBody: {
            // The gateway reads no JSON body as `{}` (see parseBody): a schema that accepts that needs none.
            required: route.bodyFormat === 'form' || !route.body.safeParse({}).success,
            content: { [route.bodyFormat === 'form' ? 'application/x-www-form-urlencoded' : 'application/json']: { schema: ref(route.body, where) } },
          },
        }
      : {}),
    responses,
  };
}

function securityOf(credential: CredentialKind): readonly (readonly CredentialKind[])[] {
  if (credential === 'none') return [];
  return credentialRequirements[credential] ?? [[credential]];
}

/** Credentials that carry a device assertion, whose replay guard may refuse a device over its share (429). */
const deviceAssertionCredentials: ReadonlySet<CredentialKind> = new Set(['deviceAssertion', 'reviewHostCapability']);

/**
 * Credentials checked against the account epoch: one issued before it was raised is refused 401
 * `account_epoch_stale`, an account-policy failure and so a Problem, also on routes whose other errors are ApiErrors.
 */
const accountEpochCredentials: ReadonlySet<CredentialKind> = new Set(['managementBearer', 'developerSession', 'managementIdentity']);

function errorStatuses(route: AnyRoute): number[] {
  // 413: the body limit is applied while reading, before a body an operation does not take is refused (400).
  const statuses = new Set<number>([400, 413, 500, 503, ...(route.errors ?? [])]);
  if (route.body) statuses.add(415);
  if (route.credential !== 'none') [401, 403].forEach((s) => statuses.add(s));
  if (route.idempotency) [409, 422].forEach((s) => statuses.add(s));
  // A device past its share of remembered assertion ids is refused 429 device_assertion_quota_exceeded.
  if (route.rateLimit || deviceAssertionCredentials.has(route.credential)) statuses.add(429);
  return [...statuses].sort((a, b) => a - b);
}

/**
 * What the spec's first tables (up to `POST /v1/auth/logout`) say each of their Problem responses means. Their
 * operations are the Problem routes that list these statuses among their errors; a generic title would not say, for
 * example, that their 503 is the runtime coordination outage.
 */
const FIRST_TABLE_PROBLEM_MEANINGS: Readonly<Record<number, string>> = {
  400: 'invalid request',
  401: 'authentication required',
  403: 'insufficient permission',
  404: 'resource not found',
  409: 'revision conflict',
  422: 'contract validation failed',
  429: 'rate limit exceeded',
  500: 'registry failure',
  502: 'configured upstream unavailable',
  503: 'runtime coordination unavailable',
};

function errorDescription(route: AnyRoute, status: number): string {
  const meaning = route.errorFormat === 'problem' && route.errors?.includes(status) ? FIRST_TABLE_PROBLEM_MEANINGS[status] : undefined;
  return meaning ?? statusTitle(status);
}

function errorResponse(route: AnyRoute, status: number): Json {
  const problem = { schema: { $ref: '#/components/schemas/Problem' } };
  const apiError = { schema: { $ref: '#/components/schemas/ApiError' } };
  const headers: Json = { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } };
  // A keyed operation's 409 may be idempotency_request_in_progress, which says when to look again.
  if (status === 503 || status === 429 || (status === 409 && route.idempotency)) headers['Retry-After'] = { $ref: '#/components/headers/RetryAfter' };
  // A precondition that failed on a tag answers with the current one, so the client can read before it writes again.
  if (status === 412) headers['ETag'] = { $ref: '#/components/headers/CurrentETag' };
  if (status === 401 && takesBearer(route.credential)) headers['WWW-Authenticate'] = { $ref: '#/components/headers/BearerChallenge' };
  if (route.errorFormat === 'oauth') {
    return { description: statusTitle(status), headers, content: { 'application/json': { schema: { $ref: '#/components/schemas/OAuthError' } } } };
  }
  const mayBeProblem =
    route.errorFormat === 'problem' ||
    status === 503 ||
    ((route.rateLimit !== undefined || deviceAssertionCredentials.has(route.credential)) && status === 429) ||
    (accountEpochCredentials.has(route.credential) && status === 401) ||
    // Runtime authorization (token, origin, missing session or lease headers, a session not the caller's), fencing
    // and quota refusals are Problems on these statuses; their validation and catalog failures are ApiErrors.
    (runtimeCredentials.has(route.credential) && [400, 401, 403, 404, 409, 429].includes(status));
  const content: Json =
    route.errorFormat === 'problem'
      ? { 'application/problem+json': problem }
      : mayBeProblem
        ? { 'application/json': apiError, 'application/problem+json': problem }
        : { 'application/json': apiError };
  return { description: errorDescription(route, status), headers, content };
}

function objectParameters(schema: z.ZodType | undefined, location: 'path' | 'query'): Json[] {
  if (!schema) return [];
  if (!(schema instanceof z.ZodObject)) throw new Error(`${location} parameters must be a zod object`);
  return Object.entries(schema.shape as Record<string, z.ZodType>).map(([name, field]) => ({
    name,
    in: location,
    required: location === 'path' || !field.safeParse(undefined).success,
    ...(field.description ? { description: field.description } : {}),
    schema: inline(field),
  }));
}

function inline(schema: z.ZodType): Json {
  const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }) as Json;
  delete json.$schema;
  tidy(json);
  return json;
}

/** Keeps only the components reachable from operations, so the document has no dead definitions. */
function pruneUnusedComponents(document: Json): Json {
  const components = document.components as Record<string, Record<string, unknown>>;
  const reachable = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (node === null || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith('#/components/')) {
        if (reachable.has(value)) continue;
        reachable.add(value);
        const [section, name] = value.slice('#/components/'.length).split('/');
        visit(components[section!]?.[name!]);
      } else visit(value);
    }
  };
  visit(document.paths);
  for (const section of ['schemas', 'headers', 'parameters']) {
    components[section] = Object.fromEntries(
      Object.entries(components[section] ?? {}).filter(([name]) => reachable.has(`#/components/${section}/${name}`)),
    );
    if (Object.keys(components[section]!).length === 0) delete components[section];
  }
  return document;
}
