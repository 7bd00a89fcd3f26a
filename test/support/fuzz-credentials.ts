import type { DeviceClient } from '../../client/device-client.js';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { authorizationUrl, cliSignIn, pkcePair, type RegistryBrowser } from '../../client/oidc-client.js';
import { declareBackend, installPlugin, runtimePerson, testEnvironment } from './runtime.js';

/** Real credentials of one person, minted through the public flows, as request headers for any security scheme. */
export interface FuzzCredentials {
  readonly device: DeviceClient;
  /** Query parameters of an authorization request that shows the page: the person's Environment, its redirect URI. */
  authorizationQuery(): Record<string, string>;
  /** Token requests as a client would send them: a live authorization code's exchange, a live refresh token's use. */
  tokenForms(): Promise<{ code: Record<string, string>; refresh: Record<string, string> }>;
  /** The fields of a live authorization page's form (its CSRF token among them), as the page would post them. */
  authorizationForm(): Promise<Record<string, string>>;
  /** Headers for the first of the operation's security requirements this person can meet; undefined if none. */
  headersFor(security: readonly (readonly string[])[], method: string, target: string, body: string | Buffer | undefined): Promise<Array<[string, string]> | undefined>;
}

type Header = [string, string];

/**
 * Enrols `handle`, registers an Environment it owns (Media installed, a backend declared), signs in to it and opens an
 * active Runtime session; opens a desktop management session and a console session. Every scheme but the review host
 * capability (which needs reviewer authority) is covered.
 */
export async function mintFuzzCredentials(server: { url: string; opsUrl: string }, handle: string): Promise<FuzzCredentials> {
  const person = await runtimePerson(server, handle);
  const environment = await testEnvironment(server.opsUrl, `${handle}-env`, handle);
  // A Plugin installed and a backend declared, so the Plugin and backend operations run their handlers.
  await installPlugin(server.opsUrl, environment.environmentId, 'plg_media');
  const declared = await declareBackend(server.opsUrl, environment.environmentId, { endpoint: `https://api.${handle}.example/v1`, scopes: ['orders:read', 'orders:write'] });
  if (declared.status !== 200) throw new Error(`backend: ${declared.status} ${await declared.text()}`);
  const page: RuntimeClient = await (await person.runtime(environment)).open();
  const desktop = await person.device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  if (desktop.status !== 201) throw new Error(`desktop session: ${desktop.status} ${await desktop.text()}`);
  const { accessToken } = (await desktop.json()) as { accessToken: string };
  const browser: RegistryBrowser = person.browser;
  const consoleSession = await browser.fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } });
  if (consoleSession.status !== 200) throw new Error(`console session: ${consoleSession.status} ${await consoleSession.text()}`);
  const { csrfToken } = (await consoleSession.json()) as { csrfToken: string };
  const cookie = browser.jar.header();
  const runtime = (active: boolean): Header[] =>
    Object.entries(page.headers({ active })).map(([name, value]) => [name, value] as Header);

  const scheme = async (name: string, method: string, target: string, body: string | Buffer | undefined): Promise<Header[] | undefined> => {
    switch (name) {
      case 'deviceAssertion':
        return [['Platform-Device-Assertion', await person.device.assertion({ method, target, ...(body === undefined ? {} : { body }), bindBody: true })]];
      case 'managementBearer':
        return [['Authorization', `Bearer ${accessToken}`]];
      case 'developerSession':
        return [
          ['Cookie', cookie],
          ['X-CSRF-Token', csrfToken],
        ];
      case 'pageSession':
        return [['Cookie', cookie]];
      case 'runtimeToken':
        return runtime(false).filter(([n]) => n === 'authorization' || n === 'origin');
      case 'runtimeSession':
      case 'runtimeActivation':
        return runtime(false);
      case 'runtimeActive':
        return runtime(true);
      default:
        return undefined;
    }
  };
  const authorizationQuery = (): Record<string, string> =>
    Object.fromEntries(new URL(authorizationUrl(server.url, { clientId: environment.clientId, redirectUri: environment.redirectUri, challenge: pkcePair().challenge, prompt: 'consent', state: 's', nonce: 'n' })).searchParams);
  return {
    device: person.device,
    authorizationQuery,
    tokenForms: async () => {
      const { verifier, challenge } = pkcePair();
      const { clientId, redirectUri } = environment;
      const { location } = await browser.authorize(authorizationUrl(server.url, { clientId, redirectUri, challenge, state: 's', nonce: 'n' }));
      const code = location?.searchParams.get('code');
      if (!code) throw new Error(`no authorization code (${location?.href})`);
      // Environment clients get no refresh token; the command-line client does.
      const cli = await cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
        const { location: back } = await browser.authorize(url);
        await fetch(back!);
      });
      if (!cli.refresh_token) throw new Error('no refresh token');
      return {
        code: { grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: clientId, code_verifier: verifier },
        refresh: { grant_type: 'refresh_token', refresh_token: cli.refresh_token, client_id: CLI_CLIENT_ID },
      };
    },
    authorizationForm: async () => {
      const url = `${server.url}/v1/oidc/authorize?${new URLSearchParams(authorizationQuery())}`;
      const page = await browser.fetch(url);
      const html = await page.text();
      if (page.status !== 200) throw new Error(`authorization page: ${page.status} ${html.slice(0, 200)}`);
      const form: Record<string, string> = {};
      for (const [, name, value] of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) form[name!] = value!.replace(/&amp;/g, '&').replace(/&quot;/g, '"');
      return { ...form, decision: 'allow' };
    },
    headersFor: async (security, method, target, body) => {
      for (const requirement of security) {
        const parts = await Promise.all(requirement.map((name) => scheme(name, method, target, body)));
        if (parts.every((p) => p !== undefined)) return parts.flat();
      }
      return undefined;
    },
  };
}
