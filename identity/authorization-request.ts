import { unstorableTextAt } from '../storage/storable-text.js';
import { hasFragment, hasUserinfo, type EnvironmentDirectory, type OidcClient } from './environments.js';
import { CLIENT_SCOPES } from './oauth-grants.js';

/** The parameters of an OIDC authorization request as sent (query of the GET, form of the POST). */
export interface AuthorizationParameters {
  readonly response_type?: string | undefined;
  readonly response_mode?: string | undefined;
  readonly client_id?: string | undefined;
  readonly redirect_uri?: string | undefined;
  readonly scope?: string | undefined;
  readonly state?: string | undefined;
  readonly nonce?: string | undefined;
  readonly code_challenge?: string | undefined;
  readonly code_challenge_method?: string | undefined;
  readonly prompt?: string | undefined;
  readonly max_age?: string | undefined;
  readonly request?: string | undefined;
  readonly request_uri?: string | undefined;
  readonly id_token_hint?: string | undefined;
}

const PARAMETER_NAMES = ['response_type', 'response_mode', 'client_id', 'redirect_uri', 'scope', 'state', 'nonce', 'code_challenge', 'code_challenge_method', 'prompt', 'max_age', 'request', 'request_uri', 'id_token_hint'] as const;

type ParameterName = (typeof PARAMETER_NAMES)[number];

/** The parameters of a request as sent, each once or (a malformed request) several times. */
export type SentParameters = { readonly [N in ParameterName]?: string | readonly string[] | undefined };

/** What makes a request malformed before its values are looked at: each names the parameters concerned. */
export interface MalformedParameters {
  /** Sent more than once. */
  readonly repeated: readonly ParameterName[];
  /** Sent once, holding text Postgres cannot keep (U+0000): none of it may reach a statement. */
  readonly unstorable: readonly ParameterName[];
}

/** The parameters sent once, and those that make the request malformed. */
export interface SplitParameters extends MalformedParameters {
  readonly parameters: AuthorizationParameters;
}

/**
 * Separates repeated parameters, and those holding text Postgres cannot keep, from the rest, so that either can be
 * answered like any other invalid request (RFC 6749 4.1.2.1: by redirect, once the client and its redirect URI are
 * known) rather than refused before the client is even looked up. Unrecognised parameters are ignored (RFC 6749
 * 3.1), repeated or not, whatever they hold.
 */
export function splitRepeated(sent: SentParameters): SplitParameters {
  const parameters: { [N in ParameterName]?: string } = {};
  const repeated: ParameterName[] = [];
  const unstorable: ParameterName[] = [];
  for (const name of PARAMETER_NAMES) {
    const value = sent[name];
    if (typeof value === 'string') {
      parameters[name] = value;
      if (unstorableTextAt(value) !== undefined) unstorable.push(name);
    } else if (value !== undefined) repeated.push(name);
  }
  return { parameters, repeated, unstorable };
}

export interface AuthorizationRequest {
  readonly client: OidcClient;
  readonly redirectUri: string;
  readonly scopes: readonly string[];
  readonly state: string | undefined;
  readonly nonce: string | undefined;
  readonly codeChallenge: string;
  readonly promptNone: boolean;
  /** `id_token_hint` (OIDC Core 3.1.2.1): whom the client expects to be signed in. */
  readonly idTokenHint: string | undefined;
  /** `max_age` (or `prompt=login`): the oldest sign-in (page session) this request accepts, in seconds; null when not asked. */
  readonly maxAgeSeconds: number | null;
}

/**
 * What an authorization request turns out to be:
 * - `fatal`: the client or redirect URI cannot be trusted, so the error is shown on the registry's page and the browser
 *   is never sent anywhere (RFC 6749 4.1.2.1);
 * - `redirect_error`: a trusted redirect URI receives `error` (and `state`, `iss`);
 * - `valid`.
 */
export type AuthorizationCheck =
  | { readonly kind: 'fatal'; readonly code: string; readonly message: string }
  | { readonly kind: 'redirect_error'; readonly redirectUri: string; readonly error: string; readonly code: string; readonly message: string; readonly state: string | undefined }
  | { readonly kind: 'valid'; readonly request: AuthorizationRequest };

const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
const MAX_AGE = /^\d{1,9}$/;
/** The shortest `max_age` a person can meet: sign in on the desktop app, come back, reload. */
export const MIN_MAX_AGE_S = 60;
const LOOPBACK_REDIRECT_HOSTS = new Set(['127.0.0.1', '[::1]']);
/** `select_account` is not among them: a browser holds one person's page session. */
const PROMPTS: ReadonlySet<string> = new Set(['none', 'login', 'consent']);

/**
 * RFC 8252 7.3: a native client listens on a loopback IP literal on any port it got, and only the port may differ
 * from a URI it registered (`registered`): scheme, host, path and query are its own. `localhost` is refused (8.3: it
 * may resolve elsewhere). Plain http is right here: the traffic never leaves the machine.
 */
export function isLoopbackRedirect(uri: string, registered: readonly string[]): boolean {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return false;
  }
  return (
    url.protocol === 'http:' &&
    LOOPBACK_REDIRECT_HOSTS.has(url.hostname) &&
    !hasUserinfo(url) &&
    !hasFragment(url) &&
    isExactSpelling(url, uri) &&
    registered.some((candidate) => URL.canParse(candidate) && withoutPort(new URL(candidate)) === withoutPort(url))
  );
}

const withoutPort = (url: URL): string => `${url.protocol}//${url.hostname}${url.pathname}${url.search}`;

/**
 * Whether `uri` is `url` as it serialises: the redirect URI is matched as a string at the token endpoint, so only one
 * spelling of each loopback address is taken. Port 80 is a port like any other (RFC 8252 7.3: "any port"), but WHATWG
 * URL drops the scheme's default port from `href`: `http://127.0.0.1:80/cb` is taken as sent too.
 */
function isExactSpelling(url: URL, uri: string): boolean {
  if (url.href === uri) return true;
  const origin = `http://${url.hostname}`;
  return url.port === '' && uri === `${origin}:80${url.href.slice(origin.length)}`;
}

const WELL_FORMED: MalformedParameters = { repeated: [], unstorable: [] };

/** RFC 6749 3.1: "Parameters sent without a value MUST be treated as if they were omitted from the request." */
function withoutEmpty(parameters: AuthorizationParameters): AuthorizationParameters {
  return Object.fromEntries(Object.entries(parameters).filter(([, value]) => value !== undefined && value !== ''));
}

export async function checkAuthorization(parameters: AuthorizationParameters, directory: EnvironmentDirectory, malformed: MalformedParameters = WELL_FORMED): Promise<AuthorizationCheck> {
  const p = withoutEmpty(parameters);
  const { repeated, unstorable } = malformed;
  // Which of several clients or redirect URIs was meant cannot be known, so neither is trusted with a redirect.
  if (repeated.includes('client_id')) return { kind: 'fatal', code: 'client_id_repeated', message: 'The request names its application more than once.' };
  // Not looked up (the statement would fail): no registered client id holds such text.
  const client = p.client_id && !unstorable.includes('client_id') ? await directory.client(p.client_id) : undefined;
  if (!client) return { kind: 'fatal', code: 'client_unknown', message: 'This application is not registered with the registry.' };
  if (repeated.includes('redirect_uri')) {
    return { kind: 'fatal', code: 'redirect_uri_repeated', message: 'The request names the address to return to more than once.' };
  }
  const redirectUri = p.redirect_uri;
  const redirectOk =
    redirectUri !== undefined &&
    (client.kind === 'cli'
      ? isLoopbackRedirect(redirectUri, client.redirectUris)
      : // A fragment is refused here too: registration let `…#` through before it checked for an empty fragment; and
        // userinfo, which registration let through before it checked for it (a registered URI is always a valid URL).
        client.redirectUris.includes(redirectUri) && !redirectUri.includes('#') && !hasUserinfo(new URL(redirectUri)));
  if (!redirectOk || redirectUri === undefined) {
    return { kind: 'fatal', code: 'redirect_uri_invalid', message: 'The address this application asked to return to is not registered for it.' };
  }
  const fail = (error: string, code: string, message: string): AuthorizationCheck => ({ kind: 'redirect_error', redirectUri, error, code, message, state: p.state });
  // A repeated state is not echoed: which one the client would recognise is unknown. Nor is a state holding U+0000:
  // it is not what a client sends, so not what it would recognise.
  const echoedState = repeated.includes('state') || unstorable.includes('state') ? undefined : p.state;
  if (repeated.length > 0) {
    const message = `parameters sent more than once: ${repeated.join(' ')}`;
    return { kind: 'redirect_error', redirectUri, error: 'invalid_request', code: 'parameter_repeated', message, state: echoedState };
  }
  if (unstorable.length > 0) {
    const message = `parameters holding U+0000: ${unstorable.join(' ')}`;
    return { kind: 'redirect_error', redirectUri, error: 'invalid_request', code: 'parameter_unstorable', message, state: echoedState };
  }
  // OIDC Core 6.1 and 6.2: request objects are not supported, and an OP that gets one MUST say so rather than ignore
  // it: the client may have put its nonce, max_age or other parameters only there, and would believe them enforced.
  if (p.request !== undefined) return fail('request_not_supported', 'request_object_unsupported', 'the request parameter (request objects) is not supported');
  if (p.request_uri !== undefined) return fail('request_uri_not_supported', 'request_uri_unsupported', 'the request_uri parameter is not supported');
  if (!p.response_type) return fail('invalid_request', 'response_type_required', 'response_type is required (response_type=code)');
  if (p.response_type !== 'code') return fail('unsupported_response_type', 'response_type_unsupported', 'only response_type=code is supported');
  // A client asking for another mode (fragment, form_post) would look for the answer where it never comes.
  if (p.response_mode !== undefined && p.response_mode !== 'query') return fail('invalid_request', 'response_mode_unsupported', 'response_mode may only be query');
  if (p.code_challenge === undefined) return fail('invalid_request', 'pkce_required', 'PKCE is required: send code_challenge with code_challenge_method=S256');
  if (p.code_challenge_method !== 'S256') return fail('invalid_request', 'pkce_method_unsupported', 'code_challenge_method must be S256 (plain is refused)');
  if (!CHALLENGE.test(p.code_challenge)) return fail('invalid_request', 'pkce_challenge_invalid', 'code_challenge must be the 43-character base64url SHA-256 of the verifier');
  if (p.state !== undefined && p.state.length > 512) {
    return { kind: 'redirect_error', redirectUri, error: 'invalid_request', code: 'state_too_long', message: 'state is limited to 512 characters', state: undefined };
  }
  if (p.nonce !== undefined && p.nonce.length > 256) return fail('invalid_request', 'nonce_too_long', 'nonce is limited to 256 characters');
  const allowed = CLIENT_SCOPES[client.kind];
  const scopes = p.scope === undefined || p.scope.trim() === '' ? [...allowed] : [...new Set(p.scope.trim().split(/ +/))];
  const unknown = scopes.filter((s) => !allowed.includes(s));
  if (unknown.length > 0) return fail('invalid_scope', 'scope_invalid', `scopes not available to this client: ${unknown.join(' ')}`);
  // OIDC Core 3.1.2.1: a space-separated list; `none` with any other value is an error.
  const prompts = new Set(p.prompt === undefined ? [] : p.prompt.split(' '));
  if ([...prompts].some((value) => !PROMPTS.has(value))) return fail('invalid_request', 'prompt_unsupported', 'prompt may be none, login, consent, or login consent');
  if (prompts.has('none') && prompts.size > 1) return fail('invalid_request', 'prompt_none_combined', 'prompt=none cannot be combined with another value');
  if (p.max_age !== undefined && !MAX_AGE.test(p.max_age)) return fail('invalid_request', 'max_age_invalid', 'max_age must be a whole number of seconds');
  // A sign-in happens in the desktop app, then the page is loaded again: a shorter bound could never be met (and 0,
  // which OIDC equates with prompt=login, would have to be a sign-in on this very page, which the registry does not offer).
  if (p.max_age !== undefined && Number(p.max_age) < MIN_MAX_AGE_S) {
    return fail('invalid_request', 'max_age_unsupported', `max_age must be at least ${MIN_MAX_AGE_S} seconds (for a fresh sign-in, send prompt=login)`);
  }
  // prompt=login re-authenticates as max_age does, with the shortest bound a person can meet: a sign-in older than that
  // gets the sign-in page, and the ID token says when the sign-in was (auth_time). A sign-in "after the request" could
  // not be told apart on the reload that follows it without keeping state per request.
  const asked = p.max_age === undefined ? null : Number(p.max_age);
  const maxAgeSeconds = prompts.has('login') ? Math.min(asked ?? MIN_MAX_AGE_S, MIN_MAX_AGE_S) : asked;
  return {
    kind: 'valid',
    request: { client, redirectUri, scopes, state: p.state, nonce: p.nonce, codeChallenge: p.code_challenge, promptNone: prompts.has('none'), idTokenHint: p.id_token_hint, maxAgeSeconds },
  };
}

/**
 * The redirect back to the client: `code` or `error`, with `state` and the issuer (RFC 9207) either way, added to the
 * redirect URI's own query, which is kept as registered (RFC 6749 3.1.2: it "MUST be retained"). Re-serialised by
 * URLSearchParams it was not: `a%20b` came back as `a+b` (which decodeURIComponent reads as a plus) and `flag` as
 * `flag=`. A parameter of the registered query named like one of ours gives way to ours, as before.
 */
export function redirectBack(redirectUri: string, issuer: string, values: Readonly<Record<string, string | undefined>>): string {
  const ours = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) if (value !== undefined) ours.set(name, value);
  ours.set('iss', issuer);
  // Redirect URIs are taken only as they serialise (registration and the loopback check compare with href), without
  // a fragment, so the text after the first `?` is the whole query, already encoded as a URL keeps it.
  const mark = redirectUri.indexOf('?');
  const base = mark < 0 ? redirectUri : redirectUri.slice(0, mark);
  const own = mark < 0 ? [] : redirectUri.slice(mark + 1).split('&');
  const kept = own.filter((pair) => pair !== '' && !ours.has([...new URLSearchParams(pair).keys()][0] ?? ''));
  return `${base}?${[...kept, ours.toString()].join('&')}`;
}
