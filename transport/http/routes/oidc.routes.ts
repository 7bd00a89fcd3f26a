import * as z from 'zod';
import type { Clock } from '../../../actors/clock.js';
import type { Accounts } from '../../../identity/accounts.js';
import { consentPage, errorPage, pageHeaders, signInPage } from '../../../identity/authorization-page.js';
import { checkAuthorization, redirectBack, splitRepeated, type AuthorizationRequest } from '../../../identity/authorization-request.js';
import type { BrowserSessions } from '../../../identity/browser-sessions.js';
import type { EnvironmentDirectory } from '../../../identity/environments.js';
import { ACCESS_TOKEN_TTL_S, CLIENT_SCOPES, type OAuthGrants } from '../../../identity/oauth-grants.js';
import { apiSchema } from '../api-schemas.js';
import { principalAs } from '../credentials.js';
import { HttpError, oauthDescription } from '../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';

/** The token endpoint's words on the refresh-token reuse grace this server applies (REFRESH_TOKEN_REUSE_GRACE_SECONDS). */
function reuseGrace(seconds: number): string {
  if (seconds === 0) return 'This server allows no reuse grace: a retry of a refresh whose reply was lost is reuse too. ';
  return (
    `One exception, for a reply that was lost: within ${seconds} seconds of its rotation, a spent refresh token ` +
    'presented again (with the same scopes, or none) is answered once like a rotation, provided the refresh token that ' +
    'rotation returned was never used; that token is then spent, so a sign-in holds one live refresh token, and ' +
    'presenting it later revokes the sign-in. A second retry, or one after the grace, after the returned token was ' +
    'used or naming other scopes, is reuse; of two retries at once, one is answered and the other is reuse, which revokes the sign-in. '
  );
}

export interface OidcDependencies {
  readonly accounts: Accounts;
  readonly sessions: BrowserSessions;
  readonly directory: EnvironmentDirectory;
  readonly grants: OAuthGrants;
  readonly issuer: () => string;
  readonly clock: Clock;
}

const optional = z.string().optional();

/**
 * The authorization request's parameters, described once for the query of the GET and the form of the POST. In the
 * query each may arrive as a list (sent more than once): that is the handler's to refuse, by redirect once the client
 * and redirect URI are trusted (RFC 6749 4.1.2.1), not the gateway's, whose refusal would show the person raw JSON.
 */
const authorizationParameters = {
  response_type: 'Must be `code`.',
  response_mode: 'Absent or `query` (the discovery document\'s `response_modes_supported`); another is `invalid_request`.',
  client_id: undefined,
  redirect_uri: 'Environment clients: exactly one of the registered URIs. CLI client: `http://127.0.0.1:{port}/callback` or `http://[::1]:{port}/callback`, any port; another path or a query is not registered (the error page, no redirect).',
  scope: 'Environment clients: `openid runtime`; CLI client: `openid management`. Absent: all of them.',
  state: undefined,
  nonce: undefined,
  code_challenge: 'base64url SHA-256 of the code verifier (43 characters).',
  code_challenge_method: 'Must be `S256`; `plain` is refused.',
  max_age:
    'Seconds (at least 60: a sign-in happens in the desktop app; for 0, which OIDC equates with `prompt=login`, send that): the oldest ' +
    'sign-in on this browser (its page session) the client accepts. An older one is treated as none (`prompt=none`: ' +
    '`login_required`; otherwise the sign-in page), and the ID token then carries `auth_time`.',
  prompt:
    '`none`: answer at once: `login_required` without a page session (or with another person\'s than `id_token_hint` names), `consent_required` unless the person already agreed to these scopes for this client (never for the CLI client), else a code. ' +
    '`login`: re-authenticate: a sign-in older than 60 seconds (the shortest a person can meet: sign in with the desktop app, reload) gets the sign-in page, as `max_age=60` would, and the ID token carries `auth_time`. ' +
    '`consent`, and `login consent`, show the consent page as always. `none` with another value, or any other value, is `invalid_request`.',
  request: 'Not supported: refused with `request_not_supported` (OIDC Core 6.1).',
  request_uri: 'Not supported: refused with `request_uri_not_supported` (OIDC Core 6.2).',
  id_token_hint:
    'With `prompt=none` (OIDC Core 3.1.2.1): an ID token the registry issued to this client, of any age while the key ' +
    'that signed it is in `/v1/auth/jwks` (a rotated-out key stays at least 30 days, a withdrawn one leaves at once), ' +
    'naming whom the client expects. Someone else signed in: `login_required`; not such an ID token: `invalid_request`. ' +
    'Not read without `prompt=none`.',
} as const;

type AuthorizationParameterName = keyof typeof authorizationParameters;

function parameterSchemas<S extends z.ZodType>(schema: () => S): { [N in AuthorizationParameterName]: z.ZodOptional<S> } {
  const entries = Object.entries(authorizationParameters).map(([name, description]) => {
    const field = schema().optional();
    return [name, description === undefined ? field : field.describe(description)];
  });
  return Object.fromEntries(entries) as { [N in AuthorizationParameterName]: z.ZodOptional<S> };
}

const AuthorizationQuery = z.object(parameterSchemas(() => z.union([z.string(), z.array(z.string())])));

const AuthorizationForm = apiSchema(
  'AuthorizationDecisionForm',
  z.object(parameterSchemas(() => z.string())).omit({ prompt: true, id_token_hint: true }).extend({
    csrf: z.string().describe('The token the consent page carries.'),
    decision: z.enum(['allow', 'deny']),
  }),
);

const TokenForm = apiSchema(
  'TokenRequestForm',
  z.object({
    grant_type: z.string().describe('`authorization_code` or `refresh_token` (CLI client only).'),
    client_id: optional,
    code: optional,
    redirect_uri: optional,
    code_verifier: optional.describe('43 to 128 characters of `A-Z a-z 0-9 - . _ ~` (RFC 7636).'),
    refresh_token: optional,
    scope: optional.describe(
      '`refresh_token` only (RFC 6749 6): omitted, the sign-in\'s scopes; otherwise it must name exactly those (any order). ' +
      'More is `invalid_scope` (code `scope_exceeds_grant`); fewer is `invalid_scope` too (code `scope_narrowing_unsupported`).',
    ),
  }),
  'Token request (RFC 6749 section 4.1.3 and 6); public clients, so no client secret.',
);

const TokenResponse = apiSchema(
  'TokenResponse',
  z.strictObject({
    access_token: z.string().describe('ES256 JWT (`typ` `at+jwt`), audience `registry-runtime` (Environment clients) or `registry-management` (CLI).'),
    token_type: z.literal('Bearer'),
    expires_in: z.number().int(),
    scope: z.string(),
    id_token: z.string().optional().describe('ES256 JWT whose `sub` is the pairwise actor id (Environment clients) or the account id (CLI).'),
    refresh_token: z.string().optional().describe('CLI client only; single use: each refresh returns the next one.'),
  }),
);

const DiscoveryDocument = apiSchema(
  'OpenIdProviderMetadata',
  z.strictObject({
    issuer: z.string(),
    authorization_endpoint: z.string(),
    token_endpoint: z.string(),
    jwks_uri: z.string(),
    response_types_supported: z.array(z.string()),
    response_modes_supported: z.array(z.string()),
    grant_types_supported: z.array(z.string()),
    subject_types_supported: z.array(z.string()),
    id_token_signing_alg_values_supported: z.array(z.string()),
    token_endpoint_auth_methods_supported: z.array(z.string()),
    code_challenge_methods_supported: z.array(z.string()),
    scopes_supported: z.array(z.string()),
    claims_supported: z.array(z.string()),
    authorization_response_iss_parameter_supported: z.boolean(),
    request_parameter_supported: z.boolean(),
    request_uri_parameter_supported: z.boolean(),
  }),
  'OpenID Provider metadata (OpenID Connect Discovery 1.0).',
);

/** The Basic scheme (RFC 7617), case-insensitive as every scheme (RFC 9110 11.1). */
const BASIC = /^Basic(?: |$)/i;
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const html = { mediaType: 'text/html; charset=utf-8' } as const;
const location = { Location: { description: 'Where the browser goes next.', schema: z.string() } };

export function oidcRoutes(deps: OidcDependencies): AnyRoute[] {
  const authorizationTag = { tags: ['Authorization'], errorFormat: 'problem' } as const;

  /** The answer to a valid request from a signed-in person who agreed (or who need not be asked again). */
  const issue = async (request: AuthorizationRequest, principal: { accountId: string; accountEpoch: number; browserId: string; sessionId: string; signedInAt: number }) => {
    const code = await deps.grants.issueCode({
      client: request.client,
      redirectUri: request.redirectUri,
      codeChallenge: request.codeChallenge,
      scopes: request.scopes,
      nonce: request.nonce,
      accountId: principal.accountId,
      accountEpoch: principal.accountEpoch,
      browserId: principal.browserId,
      sessionId: principal.sessionId,
      authTime: request.maxAgeSeconds === null ? null : principal.signedInAt,
    });
    return { status: 303 as const, body: undefined, headers: { location: redirectBack(request.redirectUri, deps.issuer(), { code, state: request.state }) } };
  };


  /** OIDC `max_age`: a sign-in older than the request accepts counts as none. */
  const recentEnough = (request: AuthorizationRequest, signedInAt: number): boolean =>
    request.maxAgeSeconds === null || deps.clock.now() - signedInAt <= request.maxAgeSeconds * 1000;

  const originOf = async (request: AuthorizationRequest): Promise<string> =>
    request.client.environmentId ? ((await deps.directory.environment(request.client.environmentId))?.origin ?? '') : new URL(request.redirectUri).origin;

  return [
    defineRoute({
      ...authorizationTag,
      operationId: 'getOpenIdConfiguration',
      method: 'get',
      path: '/.well-known/openid-configuration',
      summary: 'OpenID Provider metadata',
      credential: 'none',
      responses: { 200: { description: 'Discovery document.', schema: DiscoveryDocument } },
      handler: async () => {
        const issuer = deps.issuer();
        return {
          status: 200,
          body: {
            issuer,
            authorization_endpoint: `${issuer}/v1/oidc/authorize`,
            token_endpoint: `${issuer}/v1/oidc/token`,
            jwks_uri: `${issuer}/v1/auth/jwks`,
            response_types_supported: ['code'],
            response_modes_supported: ['query'],
            grant_types_supported: ['authorization_code', 'refresh_token'],
            subject_types_supported: ['pairwise'],
            id_token_signing_alg_values_supported: ['ES256'],
            token_endpoint_auth_methods_supported: ['none'],
            code_challenge_methods_supported: ['S256'],
            scopes_supported: [...new Set(Object.values(CLIENT_SCOPES).flat())],
            claims_supported: ['sub', 'iss', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'azp'],
            authorization_response_iss_parameter_supported: true,
            // Stated, not omitted: Discovery 1.0 reads an absent request_uri_parameter_supported as true.
            request_parameter_supported: false,
            request_uri_parameter_supported: false,
          },
        };
      },
    }),
    defineRoute({
      ...authorizationTag,
      operationId: 'authorize',
      method: 'get',
      path: '/v1/oidc/authorize',
      summary: 'Authorization endpoint (registry page)',
      description:
        'Authorization Code with PKCE (S256 only). A parameter sent without a value counts as omitted (RFC 6749 3.1). An unknown client or a redirect URI not registered for it (or either ' +
        'sent more than once) is shown as an error page and never redirected to. Other errors return to the redirect ' +
        'URI with `error`, `state` and `iss`: among them any other parameter sent more than once (`invalid_request`, ' +
        'code `parameter_repeated`; `state` is not echoed when it was the one repeated) and a missing `response_type` ' +
        '(`invalid_request`; a value other than `code` is `unsupported_response_type`), and a parameter holding U+0000 ' +
        '(`invalid_request`, code `parameter_unstorable`; such a `state` is not echoed; in `client_id` or `redirect_uri`, ' +
        'the error page). The page uses the registry page session (`POST /v1/account/page-session`): without one it asks the ' +
        'person to sign in with the desktop app (or, with `prompt=none`, returns `error=login_required`); with one it ' +
        'shows a consent form. With `prompt=none` it returns a code at once when the person already agreed to these ' +
        'scopes for this Environment client, and `consent_required` otherwise (always for the CLI client); an ' +
        '`id_token_hint` naming someone other than the person signed in is `login_required` (OIDC Core 3.1.2.1). Codes are ' +
        'single use and expire after 60 seconds. HEAD is refused (`405 method_not_allowed`, `Allow: GET, POST`): this GET ' +
        'may issue a code, which a safe method must not.',
      credential: 'none',
      answersHead: false,
      query: AuthorizationQuery,
      // Text Postgres cannot keep is a malformed request like any other: back to a trusted client as invalid_request.
      handlesUnstorableQuery: true,
      responses: {
        200: { description: 'Consent page.', text: html },
        303: { description: 'Back to the client with `code` or `error`.', headers: location },
        400: { description: 'The client or redirect URI cannot be trusted: error page, no redirect.', text: html },
        401: { description: 'No page session: the sign-in page.', text: html },
      },
      handler: async ({ query, headers, requestId }) => {
        const sent = splitRepeated(query);
        const check = await checkAuthorization(sent.parameters, deps.directory, sent);
        if (check.kind === 'fatal') return { status: 400, body: errorPage(check.message, { code: check.code, requestId }), headers: pageHeaders() };
        if (check.kind === 'redirect_error') {
          return { status: 303, body: undefined, headers: { location: redirectBack(check.redirectUri, deps.issuer(), { error: check.error, error_description: oauthDescription(check.message), state: check.state }) } };
        }
        const { request } = check;
        const lookup = await deps.sessions.fromRequest('page', headers);
        const session = lookup.status === 'live' && recentEnough(request, lookup.session.createdAt) ? lookup.session : undefined;
        if (!session) {
          if (request.promptNone) {
            return { status: 303, body: undefined, headers: { location: redirectBack(request.redirectUri, deps.issuer(), { error: 'login_required', state: request.state }) } };
          }
          return { status: 401, body: signInPage(requestId), headers: pageHeaders() };
        }
        if (request.promptNone) {
          // OIDC Core 3.1.2.1: a silent answer only for the person the client expects, when it says whom.
          const hint = request.idTokenHint === undefined ? 'same' : await deps.grants.idTokenHint(request.idTokenHint, request.client, session.accountId);
          if (hint !== 'same') {
            const error = hint === 'other'
              ? { error: 'login_required', error_description: 'someone other than the person named by id_token_hint is signed in' }
              : { error: 'invalid_request', error_description: 'id_token_hint is not an ID token the registry issued to this client' };
            return { status: 303, body: undefined, headers: { location: redirectBack(request.redirectUri, deps.issuer(), { ...error, state: request.state }) } };
          }
          // Silent renewal only for what the person already agreed to on this page, and never for the CLI client: any
          // local process can listen on a loopback port, so a CLI sign-in always shows the person the consent page.
          const agreed = request.client.kind !== 'cli' && (await deps.grants.hasConsent(session.accountId, request.client.clientId, request.scopes));
          if (!agreed) {
            return { status: 303, body: undefined, headers: { location: redirectBack(request.redirectUri, deps.issuer(), { error: 'consent_required', state: request.state }) } };
          }
          return issue(request, { ...session, sessionId: session.id, signedInAt: session.createdAt });
        }
        const account = await deps.accounts.account(session.accountId);
        const body = consentPage({ request, handle: account.handle ?? '', origin: await originOf(request), csrf: deps.sessions.csrfToken(session.id) });
        return { status: 200, body, headers: pageHeaders(request.redirectUri) };
      },
    }),
    defineRoute({
      ...authorizationTag,
      operationId: 'decideAuthorization',
      method: 'post',
      path: '/v1/oidc/authorize',
      summary: 'The consent form of the authorization page',
      description: 'Posted by the consent page with its CSRF token; re-checks the whole request, then redirects with a code or `access_denied`.',
      credential: 'pageSession',
      bodyFormat: 'form',
      body: AuthorizationForm,
      maxBodyBytes: 8 * 1024,
      responses: {
        303: { description: 'Back to the client with `code` or `error`.', headers: location },
        400: { description: 'The client or redirect URI cannot be trusted: error page, no redirect.', text: html },
      },
      errors: [403],
      handler: async ({ body, principal, requestId }) => {
        const session = principalAs(principal, 'pageSession');
        if (!deps.sessions.checkCsrf(session.sessionId, body.csrf)) {
          throw new HttpError(403, 'csrf_invalid', 'the consent form is stale or was not made by the registry; reload the page', { family: 'account_policy' });
        }
        const check = await checkAuthorization(body, deps.directory);
        if (check.kind === 'fatal') return { status: 400, body: errorPage(check.message, { code: check.code, requestId }), headers: pageHeaders() };
        if (check.kind === 'redirect_error') {
          return { status: 303, body: undefined, headers: { location: redirectBack(check.redirectUri, deps.issuer(), { error: check.error, error_description: oauthDescription(check.message), state: check.state }) } };
        }
        if (!recentEnough(check.request, session.signedInAt)) {
          return { status: 303, body: undefined, headers: { location: redirectBack(check.request.redirectUri, deps.issuer(), { error: 'login_required', state: check.request.state }) } };
        }
        if (body.decision === 'deny') {
          return { status: 303, body: undefined, headers: { location: redirectBack(check.request.redirectUri, deps.issuer(), { error: 'access_denied', state: check.request.state }) } };
        }
        await deps.grants.recordConsent(session.accountId, check.request.client.clientId, check.request.scopes);
        return issue(check.request, session);
      },
    }),
    defineRoute({
      operationId: 'token',
      method: 'post',
      path: '/v1/oidc/token',
      summary: 'Token endpoint',
      description:
        '`authorization_code` with the PKCE `code_verifier` and the same `redirect_uri`; `refresh_token` for the CLI ' +
        'client. Refresh tokens rotate: each is single use, and presenting a spent one revokes the whole sign-in ' +
        '(`invalid_grant`, code `refresh_token_reused`). ' +
        reuseGrace(deps.grants.refreshReuseGraceSeconds) +
        'A refresh always returns the sign-in\'s own scopes: a `scope` ' +
        'naming more is `invalid_scope` (RFC 6749 6), and one naming fewer is refused the same way rather than ' +
        'narrowed (the token would still be checked against the whole grant); a refused refresh leaves the refresh ' +
        'token unspent. A reused authorization code revokes what it produced. ' +
        `Access tokens live ${ACCESS_TOKEN_TTL_S} seconds; management tokens are checked online against their grant ` +
        'and the account epoch on every call (runtime tokens by the Runtime plane). ' +
        'Errors are RFC 6749 bodies with the stable `code` and `requestId` added; an unknown `client_id` is 401 ' +
        '`invalid_client` (RFC 6749 5.2). Every client is public (`token_endpoint_auth_methods_supported`: `none`): a ' +
        'request that authenticates with HTTP Basic is 401 `invalid_client` (code `client_authentication_unsupported`) ' +
        'with `WWW-Authenticate: Basic realm="registry"`, whatever else it sends. Cross-origin for the pages of ' +
        'registered Environments (see Cross-origin calls), so an Environment page can exchange its own code.',
      tags: ['Authorization'],
      credential: 'none',
      // Environment clients are public clients whose redirect URI is a page of the Environment: that page holds the
      // PKCE verifier and exchanges the code itself, so it must be able to read the answer (a form POST is sent
      // cross-origin without a preflight either way: CORS only decides whether the page may read the tokens).
      cors: true,
      errorFormat: 'oauth',
      errors: [401],
      bodyFormat: 'form',
      body: TokenForm,
      maxBodyBytes: 8 * 1024,
      responses: {
        200: { description: 'Tokens.', schema: TokenResponse },
        401: {
          description: 'Client authentication failed: an unknown `client_id`, or HTTP Basic sent.',
          headers: { 'WWW-Authenticate': { description: '`Basic realm="registry"` when the request authenticated with HTTP Basic.', schema: z.string() } },
        },
      },
      handler: async ({ body, headers }) => {
        // RFC 6749 5.2: Basic is a method this registry does not offer, so the attempt fails as client authentication,
        // answered in the scheme the client used, rather than being ignored in favour of the form's client_id.
        if (BASIC.test(headers.authorization ?? '')) {
          throw new HttpError(401, 'client_authentication_unsupported', 'clients are public: send client_id in the form, without an Authorization header', {
            oauthError: 'invalid_client',
            headers: { 'www-authenticate': 'Basic realm="registry"' },
          });
        }
        // RFC 6749 3.1: a parameter sent without a value counts as omitted; omitted, the form's schema refuses it.
        if (body.grant_type === '') throw new HttpError(400, 'grant_type_required', 'grant_type is required');
        const client = body.client_id ? await deps.directory.client(body.client_id) : undefined;
        if (!client) throw new HttpError(401, 'client_unknown', 'client_id names no registered client', { oauthError: 'invalid_client' });
        if (body.grant_type === 'authorization_code') {
          if (!body.code || !body.redirect_uri || !body.code_verifier) {
            throw new HttpError(400, 'token_request_incomplete', 'code, redirect_uri and code_verifier are required');
          }
          if (!VERIFIER.test(body.code_verifier)) throw new HttpError(400, 'pkce_verifier_invalid', 'code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~');
          const tokens = await deps.grants.exchangeCode({ client, code: body.code, redirectUri: body.redirect_uri, codeVerifier: body.code_verifier });
          return { status: 200, body: tokens, headers: { pragma: 'no-cache' } };
        }
        if (body.grant_type === 'refresh_token') {
          if (client.kind !== 'cli') throw new HttpError(400, 'grant_type_unauthorized', 'this client does not use refresh tokens', { oauthError: 'unauthorized_client' });
          if (!body.refresh_token) throw new HttpError(400, 'token_request_incomplete', 'refresh_token is required');
          // RFC 6749 3.1: a parameter sent without a value counts as omitted.
          const scopes = body.scope === undefined || body.scope.trim() === '' ? undefined : [...new Set(body.scope.trim().split(/ +/))];
          const tokens = await deps.grants.refresh({ client, refreshToken: body.refresh_token, scopes });
          return { status: 200, body: tokens, headers: { pragma: 'no-cache' } };
        }
        throw new HttpError(400, 'grant_type_unsupported', 'grant_type must be authorization_code or refresh_token', { oauthError: 'unsupported_grant_type' });
      },
    }),
  ];
}
