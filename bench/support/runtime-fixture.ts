import { pkcePair } from '../../client/oidc-client.js';
import { DeviceClient } from '../../client/device-client.js';
import { acceptDeviceKey } from '../../identity/device-keys.js';
import { identityServices, type IdentityServices } from '../../identity/identity.feature.js';
import { newId } from '../../identity/ids.js';
import type { ServerServices } from '../../server/server.js';

export interface BenchEnvironment {
  readonly environmentId: string;
  readonly origin: string;
  readonly clientId: string;
  readonly redirectUri: string;
}

export interface BenchPrincipal {
  readonly accountId: string;
  /** A runtime access token for the principal's Environment (10 minutes). */
  readonly accessToken: string;
}

/**
 * Principals for the Runtime benchmark, made inside the server process through the same services its routes call:
 * an account enrolled by possession (handle, device and account actors), then the Environment sign-in as the token
 * endpoint completes it (an authorization code issued for the person's consent, exchanged with its PKCE verifier:
 * one grant row, signed tokens). Only the HTTP and browser legs are skipped: enrolment start is rate limited per client
 * address (10/min, burst 20), which a thousand principals from one loopback address cannot pass, and the gateway
 * takes the address from the socket (it does not honour X-Forwarded-For, rightly). What the bench measures (session
 * activation, the runtime socket) then runs over HTTP and WebSocket with these tokens, exactly as a page's would.
 */
export class RuntimeFixture {
  readonly #identity: IdentityServices;

  private constructor(identity: IdentityServices) {
    this.#identity = identity;
  }

  static async create(services: ServerServices): Promise<RuntimeFixture> {
    return new RuntimeFixture(await identityServices(services));
  }

  /** Registers an Environment (as the operators' command line does), owned by a fresh account. */
  async environment(environmentId: string): Promise<BenchEnvironment> {
    const owner = await this.#enrol(`own-${environmentId}`.slice(0, 32));
    const origin = `https://${environmentId}.bench.example`;
    const redirectUri = `${origin}/callback`;
    const { client } = await this.#identity.directory.register(
      { environmentId, origin, ownerAccountId: owner, clientName: `bench ${environmentId}`, redirectUris: [redirectUri] },
      'operator:bench',
    );
    return { environmentId, origin, clientId: client.clientId, redirectUri };
  }

  /** One principal per handle, each signed in to `environment`; `concurrency` enrolments at a time. */
  async principals(environment: BenchEnvironment, handles: readonly string[], concurrency: number): Promise<BenchPrincipal[]> {
    const client = await this.#identity.directory.client(environment.clientId);
    if (!client) throw new Error(`no client ${environment.clientId}`);
    const out = new Array<BenchPrincipal>(handles.length);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < handles.length) {
        const i = next++;
        const accountId = await this.#enrol(handles[i]!);
        const { verifier, challenge } = pkcePair();
        const accountEpoch = await this.#identity.accounts.epochOf(accountId);
        const browserId = newId('brw');
        // The page session the authorization page would hold: the exchange checks it is still signed in.
        const { session } = await this.#identity.sessions.create('page', { browserId, accountId, accountEpoch });
        const code = await this.#identity.grants.issueCode({
          client,
          redirectUri: environment.redirectUri,
          codeChallenge: challenge,
          scopes: ['openid', 'runtime'],
          nonce: newId('n'),
          accountId,
          accountEpoch,
          browserId,
          sessionId: session.id,
          authTime: Date.now(),
        });
        const tokens = await this.#identity.grants.exchangeCode({ client, code, redirectUri: environment.redirectUri, codeVerifier: verifier });
        out[i] = { accountId, accessToken: tokens.access_token };
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
    return out;
  }

  async #enrol(handle: string): Promise<string> {
    const accounts = this.#identity.accounts;
    const device = await DeviceClient.generate(`${handle} device`);
    const key = await acceptDeviceKey({ kty: 'EC', crv: 'P-256', x: device.publicJwk.x!, y: device.publicJwk.y! });
    const started = await accounts.startEnrolment({ handle, deviceName: device.name, clientAddress: '127.0.0.1', ...key });
    const { accountId } = (await accounts.lookupDevice(started.deviceId))!;
    await accounts.completeEnrolment(accountId, started.enrolmentId, started.nonce);
    return accountId;
  }
}
