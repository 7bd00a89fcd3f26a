import { randomBytes } from 'node:crypto';
import { authorizationUrl, codeFromRedirect, discover, exchangeCode, pkcePair, type RegistryBrowser, type TokenSet } from './oidc-client.js';

/**
 * An Environment's sign-in through the registry: the person's browser walks the authorization page, the Environment
 * checks the redirect (state, issuer), exchanges the code with its PKCE verifier and checks the ID token (nonce).
 * Returns the token set (its access token is the runtime access token).
 */
export async function environmentSignIn(
  baseUrl: string,
  browser: RegistryBrowser,
  clientId: string,
  redirectUri: string,
  options: { now?: () => number } = {},
): Promise<TokenSet> {
  const discovery = await discover(baseUrl);
  const { verifier, challenge } = pkcePair();
  const state = randomBytes(16).toString('base64url');
  const nonce = randomBytes(16).toString('base64url');
  const { location, response } = await browser.authorize(authorizationUrl(baseUrl, { clientId, redirectUri, challenge, state, nonce }));
  if (!location) throw new Error(`authorization did not redirect back (${response.status})`);
  if (`${location.origin}${location.pathname}` !== redirectUri) throw new Error(`redirected to ${location.href}, not to ${redirectUri}`);
  const code = codeFromRedirect(location.searchParams, { state, issuer: discovery.issuer });
  return exchangeCode(baseUrl, { clientId, code, redirectUri, verifier, nonce, discovery, ...options });
}

export interface RuntimeLease {
  readonly leaseId: string;
  readonly leaseVersion: number;
}

/**
 * One Runtime of an Environment page, as its runtime library would hold it: the access token, the page's origin, the
 * session it created and the lease it holds. Every method returns the raw Response so callers can check refusals.
 */
export class RuntimeClient {
  sessionId: string | undefined;
  lease: RuntimeLease | undefined;

  constructor(
    readonly baseUrl: string,
    public accessToken: string,
    readonly origin: string,
  ) {}

  /** Headers of a session-bound call; with `active`, also the lease fence. */
  headers(options: { active?: boolean; json?: boolean } = {}): Record<string, string> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.accessToken}`, origin: this.origin };
    if (options.json) headers['content-type'] = 'application/json';
    if (this.sessionId) headers['x-platform-runtime-session'] = this.sessionId;
    if (options.active && this.lease) {
      headers['x-platform-runtime-lease'] = this.lease.leaseId;
      headers['x-platform-runtime-lease-version'] = String(this.lease.leaseVersion);
    }
    return headers;
  }

  async createSession(): Promise<Response> {
    const res = await fetch(`${this.baseUrl}/v1/runtime/session`, { method: 'POST', headers: { authorization: `Bearer ${this.accessToken}`, origin: this.origin } });
    if (res.status === 201) {
      this.sessionId = ((await res.clone().json()) as { sessionId: string }).sessionId;
      // A lease belongs to the session that was activated, never to a new one.
      this.lease = undefined;
    }
    return res;
  }

  async activate(): Promise<Response> {
    const res = await fetch(`${this.baseUrl}/v1/runtime/session/activate`, { method: 'POST', headers: this.headers() });
    if (res.status === 200) {
      const body = (await res.clone().json()) as { lease: RuntimeLease };
      this.lease = { leaseId: body.lease.leaseId, leaseVersion: body.lease.leaseVersion };
    }
    return res;
  }

  read(): Promise<Response> {
    return fetch(`${this.baseUrl}/v1/runtime/session`, { headers: this.headers() });
  }

  async release(): Promise<Response> {
    const res = await fetch(`${this.baseUrl}/v1/runtime/session/release`, { method: 'POST', headers: this.headers() });
    if (res.status === 200) this.lease = undefined;
    return res;
  }

  controlToken(): Promise<Response> {
    return fetch(`${this.baseUrl}/v1/runtime/control-token`, { method: 'POST', headers: this.headers() });
  }

  /** A lease-fenced call: the session and lease headers are added. */
  fenced(path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Response> {
    const json = init.body !== undefined;
    return fetch(`${this.baseUrl}${path}`, {
      method: init.method ?? 'GET',
      headers: { ...this.headers({ active: true, json }), ...init.headers },
      ...(json ? { body: JSON.stringify(init.body) } : {}),
    });
  }

  /** Asks for a Plugin Grant (lease-fenced). */
  pluginGrant(pluginId: string, body: { component: string; scopes: readonly string[]; context: unknown }): Promise<Response> {
    return this.fenced(`/v1/runtime/plugins/${pluginId}/grants`, { method: 'POST', body });
  }

  /** Address of the runtime WebSocket for the lease this page holds. */
  socketUrl(): string {
    if (!this.sessionId || !this.lease) throw new Error('activate the session first');
    const url = new URL('/v1/runtime/socket', this.baseUrl.replace(/^http/, 'ws'));
    url.search = new URLSearchParams({ session: this.sessionId, lease: this.lease.leaseId, leaseVersion: String(this.lease.leaseVersion) }).toString();
    return url.href;
  }

  /** Subprotocols a browser offers: the codec, and the bearer (browsers cannot set headers on a WebSocket). */
  static subprotocols(bearer: string, codec = 'registry.v1.json'): string[] {
    return [codec, `registry.bearer.${bearer}`];
  }

  /** Creates a session and activates it; throws unless both succeed. */
  async open(): Promise<this> {
    const created = await this.createSession();
    if (created.status !== 201) throw new Error(`session create failed: ${created.status} ${await created.text()}`);
    const activated = await this.activate();
    if (activated.status !== 200) throw new Error(`activate failed: ${activated.status} ${await activated.text()}`);
    return this;
  }
}
