import { authorizationUrl, codeFromRedirect, discover, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { environmentSignIn, RuntimeClient } from '../../client/runtime-client.js';
import type { DeviceClient } from '../../client/device-client.js';
import { enrolFirst, registerEnvironment } from './identity.js';

/**
 * Server settings of a file that opens Runtime pages once on the real clock (in `before`, or in one test for the later
 * ones) and never renews their leases: leases that outlast a slow run. At the 90 s default a file that ran longer on a
 * loaded machine saw them lapse mid-file, and every later lease-fenced call was refused as standby.
 */
export const LONG_LEASE_ENV: Readonly<Record<string, string>> = Object.freeze({ RUNTIME_LEASE_TTL_SECONDS: '3600' });

export interface RuntimePerson {
  readonly accountId: string;
  readonly device: DeviceClient;
  readonly browser: RegistryBrowser;
  /** A fresh runtime access token for the Environment, through the whole OIDC flow in this person's browser. */
  token(environment?: TestEnvironment): Promise<string>;
  /** A Runtime page of the Environment with a fresh token (no session yet). */
  runtime(environment?: TestEnvironment): Promise<RuntimeClient>;
}

export interface TestEnvironment {
  readonly environmentId: string;
  readonly origin: string;
  readonly clientId: string;
  readonly redirectUri: string;
}

/** Registers an Environment owned by `ownerHandle` through the operator listener. */
export async function testEnvironment(opsUrl: string, environmentId: string, ownerHandle: string): Promise<TestEnvironment> {
  const origin = `https://${environmentId}.example`;
  const redirectUri = `${origin}/callback`;
  const { clientId } = await registerEnvironment(opsUrl, { environmentId, origin, ownerHandle, redirectUris: [redirectUri] });
  return { environmentId, origin, clientId, redirectUri };
}

/**
 * Enrols a person and opens their registry page session, ready to sign in to Environments. `from` is the loopback
 * source address of the enrolment (see startEnrolment).
 */
export async function runtimePerson(server: { url: string }, handle: string, defaultEnvironment?: TestEnvironment, from?: string): Promise<RuntimePerson> {
  const { device, accountId } = await enrolFirst(server.url, handle, from);
  const browser = new RegistryBrowser(server.url, device);
  const opened = await browser.openPageSession();
  if (opened.status !== 204) throw new Error(`page session: ${opened.status} ${await opened.text()}`);
  const token = async (environment = defaultEnvironment): Promise<string> => {
    if (!environment) throw new Error('name the Environment');
    return (await environmentSignIn(server.url, browser, environment.clientId, environment.redirectUri)).access_token;
  };
  return {
    accountId,
    device,
    browser,
    token,
    runtime: async (environment = defaultEnvironment) => new RuntimeClient(server.url, await token(environment), environment!.origin),
  };
}

/**
 * An Environment sign-in done by hand, as environmentSignIn does it, keeping its token request: `replay` presents the
 * same authorization code again, which revokes the sign-in it obtained (RFC 6749 4.1.2) without any account change.
 */
export async function replayableSignIn(baseUrl: string, person: RuntimePerson, environment: TestEnvironment): Promise<{ accessToken: string; replay(): Promise<{ status: number; body: Record<string, unknown> }> }> {
  const discovery = await discover(baseUrl);
  const { verifier, challenge } = pkcePair();
  const { location, response } = await person.browser.authorize(authorizationUrl(baseUrl, { clientId: environment.clientId, redirectUri: environment.redirectUri, challenge, state: 'st', nonce: 'nn' }));
  if (!location) throw new Error(`authorization did not redirect back (${response.status})`);
  const code = codeFromRedirect(location.searchParams, { state: 'st', issuer: discovery.issuer });
  const form = { grant_type: 'authorization_code', client_id: environment.clientId, code, redirect_uri: environment.redirectUri, code_verifier: verifier };
  const first = await tokenRequest(baseUrl, form);
  if (first.status !== 200) throw new Error(`token exchange: ${first.status} ${JSON.stringify(first.body)}`);
  return { accessToken: String(first.body.access_token), replay: () => tokenRequest(baseUrl, form) };
}

/** Browser SSO logout of the person's registry browser, as the console does it (console session, CSRF). */
export async function logoutBrowser(baseUrl: string, person: RuntimePerson): Promise<Response> {
  const desktop = await person.device.request(baseUrl, 'POST', '/v1/account/desktop-management-sessions', {});
  if (desktop.status !== 201) throw new Error(`desktop session: ${desktop.status} ${await desktop.text()}`);
  const { accessToken } = (await desktop.json()) as { accessToken: string };
  const consoleSession = await person.browser.fetch(`${baseUrl}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } });
  if (consoleSession.status !== 200) throw new Error(`console session: ${consoleSession.status} ${await consoleSession.text()}`);
  const { csrfToken } = (await consoleSession.json()) as { csrfToken: string };
  return person.browser.fetch(`${baseUrl}/v1/auth/logout`, { method: 'POST', headers: { 'x-csrf-token': csrfToken } });
}

/** Installs a Plugin in an Environment through the operator listener. */
export async function installPlugin(opsUrl: string, environmentId: string, pluginId: string): Promise<void> {
  const res = await fetch(`${opsUrl}/registry/environments/${environmentId}/plugins/${pluginId}`, { method: 'PUT', headers: { 'x-operator-name': 'test-operator' } });
  if (res.status !== 200) throw new Error(`plugin install: ${res.status} ${await res.text()}`);
}

/** Declares (or re-declares) an Environment's backend through the operator listener, as `registry-admin` does. */
export function declareBackend(opsUrl: string, environmentId: string, body: unknown): Promise<Response> {
  return fetch(`${opsUrl}/registry/environments/${environmentId}/backend`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'test-operator' },
    body: JSON.stringify(body),
  });
}

/**
 * A page's session state as `GET /v1/runtime/session` tells it: the body's status when active; otherwise the 409's
 * code names it (`standby`, `superseded`, `ended`), since only an active session may read itself.
 */
export async function sessionState(page: RuntimeClient): Promise<string> {
  const res = await page.read();
  const body = (await res.json()) as { status?: string; code?: string };
  if (res.status === 200 && body.status === 'active') return 'active';
  const state = res.status === 409 ? /^runtime_session_(standby|superseded|ended)$/.exec(body.code ?? '')?.[1] : undefined;
  if (state === undefined) throw new Error(`GET /v1/runtime/session answered ${res.status} ${JSON.stringify(body)}`);
  return state;
}

/** Runs `work` over 0…count-1 with at most `width` at a time (a crowd enrolled or connected without a stampede). */
export async function inParallel(count: number, width: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

/**
 * `count` people enrolled (`<prefix>-000`, …) each with an active page in `world`, eight at a time. Enrolment start is
 * limited per client address (bursts of 20), so the crowd enrols from several loopback source addresses.
 */
export async function crowdPages(server: { url: string }, world: TestEnvironment, prefix: string, count: number): Promise<RuntimeClient[]> {
  const pages: RuntimeClient[] = [];
  await inParallel(count, 8, async (i) => {
    const person = await runtimePerson(server, `${prefix}-${String(i).padStart(3, '0')}`, world, `127.0.0.${2 + Math.floor(i / 20)}`);
    pages[i] = await (await person.runtime()).open();
  });
  return pages;
}
