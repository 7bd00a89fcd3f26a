import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import type { TokenResponse } from '../identity/oauth-grants.js';
import type { DeviceClient } from './device-client.js';

/** PKCE (RFC 7636), S256: a fresh 43-character verifier and its challenge. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** What the token endpoint answers: the server's own type, so client and server cannot drift apart. */
export type TokenSet = TokenResponse;

/** A cookie jar for one origin: enough to carry the registry's session cookies between requests. */
export class CookieJar {
  readonly #cookies = new Map<string, string>();

  store(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      if (/max-age=0/i.test(line)) this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
  }

  get(name: string): string | undefined {
    return this.#cookies.get(name);
  }

  header(): string {
    return [...this.#cookies].map(([n, v]) => `${n}=${v}`).join('; ');
  }
}

export function authorizationUrl(
  baseUrl: string,
  params: { clientId: string; redirectUri: string; challenge: string; state?: string; nonce?: string; scope?: string; prompt?: string; method?: string },
): string {
  const url = new URL('/v1/oidc/authorize', baseUrl);
  const query: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: params.clientId,
    redirect_uri: params.redirectUri,
    code_challenge: params.challenge,
    code_challenge_method: params.method ?? 'S256',
    state: params.state,
    nonce: params.nonce,
    scope: params.scope,
    prompt: params.prompt,
  };
  for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v);
  return url.href;
}

/**
 * A browser of the person who owns `device`: it holds the registry's cookies, opens a page session with the device
 * key, and clicks through the registry's authorization page the way a person would (read the form, post it back).
 */
export class RegistryBrowser {
  readonly jar = new CookieJar();
  readonly #baseUrl: string;
  readonly #device: DeviceClient;

  constructor(baseUrl: string, device: DeviceClient) {
    this.#baseUrl = baseUrl;
    this.#device = device;
  }

  async openPageSession(): Promise<Response> {
    const response = await this.#device.request(this.#baseUrl, 'POST', '/v1/account/page-session', undefined, { headers: this.#cookieHeaders() });
    this.jar.store(response);
    return response;
  }

  async fetch(url: string, init: RequestInit = {}): Promise<Response> {
    const response = await fetch(url, { ...init, redirect: 'manual', headers: { ...(init.headers as Record<string, string>), ...this.#cookieHeaders() } });
    this.jar.store(response);
    return response;
  }

  /**
   * Follows an authorization URL to the point where the browser would leave for the client: returns that redirect
   * (`Location` with `code` or `error`), or the registry page's response when it does not redirect.
   */
  async authorize(url: string, decision: 'allow' | 'deny' = 'allow'): Promise<{ location?: URL; response: Response }> {
    const page = await this.fetch(url);
    if (page.status === 303) return { location: new URL(page.headers.get('location')!), response: page };
    if (page.status !== 200) return { response: page };
    const html = await page.text();
    const form = new URLSearchParams();
    for (const [, name, value] of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) form.set(name!, unescapeHtml(value!));
    form.set('decision', decision);
    const posted = await this.fetch(new URL('/v1/oidc/authorize', this.#baseUrl).href, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(this.#baseUrl).origin },
      body: form.toString(),
    });
    return posted.status === 303 ? { location: new URL(posted.headers.get('location')!), response: posted } : { response: posted };
  }

  #cookieHeaders(): Record<string, string> {
    const cookie = this.jar.header();
    return cookie ? { cookie } : {};
  }
}

function unescapeHtml(text: string): string {
  return text.replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]!);
}

/** The token endpoint: returns the parsed body and status, error bodies included. */
export async function tokenRequest(baseUrl: string, form: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(new URL('/v1/oidc/token', baseUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** What a client needs of the registry's discovery document to check what comes back to it. */
export interface RegistryDiscovery {
  readonly issuer: string;
  readonly jwks_uri: string;
}

export async function discover(baseUrl: string): Promise<RegistryDiscovery> {
  const response = await fetch(new URL('/.well-known/openid-configuration', baseUrl));
  if (response.status !== 200) throw new Error(`discovery failed: ${response.status}`);
  const body = (await response.json()) as Partial<RegistryDiscovery>;
  if (typeof body.issuer !== 'string' || typeof body.jwks_uri !== 'string') throw new Error('discovery document without issuer or jwks_uri');
  return { issuer: body.issuer, jwks_uri: body.jwks_uri };
}

/** Clocks of a laptop and the registry disagree by this much at most before an ID token counts as expired. */
const ID_TOKEN_LEEWAY_S = 60;

/**
 * Checks an ID token as OIDC Core 3.1.3.7 asks of its client: signed by a key the registry publishes, from the
 * registry, for this client, not expired (by the client's clock, with a minute's leeway), and carrying the nonce of
 * this sign-in, so that a token minted for another client or another sign-in cannot be passed off as this one's.
 */
export async function verifyIdToken(
  idToken: string,
  expected: { discovery: RegistryDiscovery; clientId: string; nonce: string; now?: () => number },
): Promise<JWTPayload> {
  const { payload } = await jwtVerify(idToken, createRemoteJWKSet(new URL(expected.discovery.jwks_uri)), {
    issuer: expected.discovery.issuer,
    audience: expected.clientId,
    algorithms: ['ES256'],
    currentDate: new Date((expected.now ?? Date.now)()),
    clockTolerance: ID_TOKEN_LEEWAY_S,
  });
  if (payload.nonce !== expected.nonce) throw new Error('the ID token does not carry the nonce of this sign-in');
  return payload;
}

/**
 * Takes the code out of an authorization response that came back to a client, or says why it cannot: the response
 * must carry this sign-in's `state` and the registry's `iss` (RFC 9207: the registry always sends it, so a response
 * without it, or from another issuer, is a mix-up and its code must not be exchanged).
 */
export function codeFromRedirect(params: URLSearchParams, expected: { state: string; issuer: string }): string {
  if (params.get('state') !== expected.state) throw new Error('the redirect does not carry the state of this sign-in');
  if (params.get('iss') !== expected.issuer) throw new Error(`the redirect comes from issuer ${params.get('iss') ?? '(none)'}, not ${expected.issuer}`);
  const code = params.get('code');
  if (!code) throw new Error(`sign-in failed: ${params.get('error') ?? 'no code'}`);
  return code;
}

/**
 * Exchanges a code with its PKCE verifier and checks the ID token that comes back. Both sign-ins ask for `openid` (the
 * CLI by name, an Environment through its client's scopes) and send a nonce, so an answer without an ID token is
 * refused: taking it would skip every check the ID token carries.
 */
export async function exchangeCode(
  baseUrl: string,
  exchange: { clientId: string; code: string; redirectUri: string; verifier: string; nonce: string; discovery: RegistryDiscovery; now?: () => number },
): Promise<TokenSet> {
  const { status, body } = await tokenRequest(baseUrl, {
    grant_type: 'authorization_code',
    client_id: exchange.clientId,
    code: exchange.code,
    redirect_uri: exchange.redirectUri,
    code_verifier: exchange.verifier,
  });
  if (status !== 200) throw new Error(`token exchange failed: ${String(body.code ?? body.error)}`);
  const tokens = body as unknown as TokenSet;
  if (tokens.id_token === undefined) throw new Error('the token response carries no ID token, though openid was asked for');
  await verifyIdToken(tokens.id_token, exchange);
  return tokens;
}

/**
 * The CLI's sign-in (RFC 8252): listen on a loopback port the OS picks, send the person's browser to the
 * authorization page, take the code from the redirect, exchange it with the PKCE verifier. A request to the listener
 * that does not carry this sign-in's state (another local process, an old tab reloaded) is answered and ignored: only
 * the registry's redirect for this sign-in ends the wait.
 */
export async function cliSignIn(
  baseUrl: string,
  clientId: string,
  openBrowser: (url: string) => Promise<void>,
  options: { now?: () => number } = {},
): Promise<TokenSet> {
  const discovery = await discover(baseUrl);
  const { verifier, challenge } = pkcePair();
  const state = randomBytes(16).toString('base64url');
  const nonce = randomBytes(16).toString('base64url');
  let resolveCode!: (code: string) => void;
  let rejectCode!: (error: Error) => void;
  const codeArrived = new Promise<string>((resolve, reject) => ((resolveCode = resolve), (rejectCode = reject)));
  // The redirect may end the wait while openBrowser is still running: handled now, `await codeArrived` still throws.
  codeArrived.catch(() => {});
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== '/callback') return void res.writeHead(404).end();
    if (url.searchParams.get('state') !== state) {
      return void res.writeHead(400, { 'content-type': 'text/plain' }).end('This is not the sign-in the terminal is waiting for.');
    }
    try {
      resolveCode(codeFromRedirect(url.searchParams, { state, issuer: discovery.issuer }));
      res.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this window and return to the terminal.');
    } catch (error) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('Sign-in failed: see the terminal.');
      rejectCode(error as Error);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const redirectUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`;
    await openBrowser(authorizationUrl(baseUrl, { clientId, redirectUri, challenge, state, nonce, scope: 'openid management' }));
    const code = await codeArrived;
    return await exchangeCode(baseUrl, { clientId, code, redirectUri, verifier, nonce, discovery, ...options });
  } finally {
    server.close();
  }
}
