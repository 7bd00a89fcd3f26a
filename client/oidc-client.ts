import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
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

/**
 * The CLI's sign-in (RFC 8252): listen on a loopback port the OS picks, send the person's browser to the
 * authorization page, take the code from the redirect, exchange it with the PKCE verifier.
 */
export async function cliSignIn(baseUrl: string, clientId: string, openBrowser: (url: string) => Promise<void>): Promise<TokenSet> {
  const { verifier, challenge } = pkcePair();
  const state = randomBytes(16).toString('base64url');
  let resolveCode!: (code: string) => void;
  let rejectCode!: (error: Error) => void;
  const codeArrived = new Promise<string>((resolve, reject) => ((resolveCode = resolve), (rejectCode = reject)));
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== '/callback') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this window and return to the terminal.');
    if (url.searchParams.get('state') !== state) return rejectCode(new Error('state mismatch on the sign-in redirect'));
    const code = url.searchParams.get('code');
    if (!code) return rejectCode(new Error(`sign-in failed: ${url.searchParams.get('error') ?? 'no code'}`));
    resolveCode(code);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const redirectUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`;
    await openBrowser(authorizationUrl(baseUrl, { clientId, redirectUri, challenge, state, scope: 'openid management' }));
    const code = await codeArrived;
    const { status, body } = await tokenRequest(baseUrl, { grant_type: 'authorization_code', client_id: clientId, code, redirect_uri: redirectUri, code_verifier: verifier });
    if (status !== 200) throw new Error(`token exchange failed: ${String(body.code ?? body.error)}`);
    return body as unknown as TokenSet;
  } finally {
    server.close();
  }
}
