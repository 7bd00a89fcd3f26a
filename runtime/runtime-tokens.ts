import type { Clock } from '../actors/clock.js';
import { worldOrigin, type EnvironmentDirectory } from '../identity/environments.js';
import type { OAuthGrants } from '../identity/oauth-grants.js';
import { ACCESS_TOKEN_TYPE, RUNTIME_AUDIENCE } from '../identity/oauth-grants.js';
import type { RegistrySigningKeys } from '../identity/signing-keys.js';
import { bearerToken, type RuntimeCaller } from '../transport/http/credentials.js';
import { HttpError } from '../transport/http/errors.js';
import { coordinated } from './coordination.js';

export interface RuntimeTokenDependencies {
  readonly keys: RegistrySigningKeys;
  readonly grants: OAuthGrants;
  readonly directory: EnvironmentDirectory;
  readonly epochOf: (accountId: string) => Promise<number>;
  readonly issuer: () => string;
  readonly clock: Clock;
}

const RUNTIME_SCOPE = 'runtime';

/**
 * The Runtime plane's refusals of a credential (runtime access token, control token). They name no challenge: the
 * gateway (HTTP) and the WebSocket framework (upgrades) add the Bearer challenge to every 401 of an operation a bearer
 * opens, from whether a bearer was sent (`bearerChallenge`).
 */
export const tokenInvalid = (message: string): HttpError => new HttpError(401, 'runtime_token_invalid', message, { family: 'runtime' });

export const authorizationExpired = (message: string): HttpError => new HttpError(401, 'runtime_authorization_expired', message, { family: 'runtime' });

/**
 * Establishes a Runtime caller from a runtime access token and the request's `Origin`.
 *
 *   runtime_token_invalid          no bearer, not a registry runtime access token (bad signature, another audience or
 *                                  type, e.g. a management token or a control token)
 *   runtime_authorization_expired  a genuine token whose authorization has ended: past its expiry, or its grant was
 *                                  revoked (logout), expired, or issued under an account epoch since raised
 *   runtime_origin_required        no `Origin` header (400)
 *   runtime_origin_mismatch        `Origin` is neither the Environment's registered origin nor its world address, e.g.
 *                                  a token of another Environment than the origin's (403)
 *   insufficient_scope             the sign-in was granted `openid` alone, not `runtime` (403)
 *
 * The grant is checked online on every call, so a logout takes effect at once.
 */
export class RuntimeTokens {
  readonly #d: RuntimeTokenDependencies;

  constructor(dependencies: RuntimeTokenDependencies) {
    this.#d = dependencies;
  }

  /**
   * `admit` runs once the token is known genuine (offline: signature, expiry, Origin present) and before anything is
   * read online; it may refuse by throwing (the runtime socket's upgrade budgets, keyed by the token's sign-in and
   * person).
   */
  async caller(
    headers: Readonly<Record<string, string>>,
    bearer?: string,
    admit?: (claims: { readonly grantId: string; readonly environmentId: string; readonly actorId: string }) => void,
  ): Promise<RuntimeCaller> {
    const token = bearer ?? bearerToken(headers);
    if (!token) throw tokenInvalid('send the runtime access token: Authorization: Bearer <token>');
    const origin = headers.origin;
    if (origin === undefined || origin === '' || origin === 'null') {
      throw new HttpError(400, 'runtime_origin_required', 'Runtime calls must send the Origin of the Environment page', { family: 'runtime' });
    }
    let claims: { sid: string; env: string; sub: string };
    try {
      const payload = await this.#d.keys.verify(token, { typ: ACCESS_TOKEN_TYPE, issuer: this.#d.issuer(), audience: RUNTIME_AUDIENCE, clock: this.#d.clock });
      if (typeof payload.sid !== 'string' || typeof payload.env !== 'string' || typeof payload.sub !== 'string') throw new Error('claims missing');
      claims = { sid: payload.sid, env: payload.env, sub: payload.sub };
    } catch (error) {
      if ((error as { code?: string }).code === 'ERR_JWT_EXPIRED') throw authorizationExpired('the runtime access token has expired; sign in to the Environment again');
      throw tokenInvalid('the bearer is not a valid registry runtime access token');
    }
    admit?.({ grantId: claims.sid, environmentId: claims.env, actorId: claims.sub });
    return coordinated(async () => {
      const environment = await this.#d.directory.environment(claims.env);
      if (!environment) throw tokenInvalid('the token names an Environment that is not registered');
      if (origin !== environment.origin && origin !== worldOrigin(environment.id)) {
        throw new HttpError(403, 'runtime_origin_mismatch', `this token is for the Environment at ${environment.origin}; the request came from ${origin}`, { family: 'runtime' });
      }
      const grant = await this.#d.grants.live(claims.sid);
      if (!grant || grant.kind !== 'environment' || grant.environmentId !== environment.id) {
        throw authorizationExpired('the sign-in behind this token has ended (logout, revocation or expiry); sign in to the Environment again');
      }
      // `openid` alone: the person agreed to be known to the Environment, not to let its pages act for them.
      if (!grant.scopes.includes(RUNTIME_SCOPE)) {
        throw new HttpError(403, 'insufficient_scope', 'this sign-in was not granted the runtime scope; sign in to the Environment asking for `openid runtime`', {
          family: 'runtime',
          headers: { 'www-authenticate': `Bearer error="insufficient_scope", scope="${RUNTIME_SCOPE}"` },
        });
      }
      if ((await this.#d.epochOf(grant.accountId)) !== grant.accountEpoch) {
        throw authorizationExpired("the account's devices changed since this sign-in; sign in to the Environment again");
      }
      return {
        accountId: grant.accountId,
        actorId: claims.sub,
        environmentId: environment.id,
        origin,
        grantId: grant.id,
        browserId: grant.browserId,
      };
    });
  }

  /** Whether the sign-in behind a runtime token still holds: the grant live and issued under the current epoch. */
  async signInLive(grantId: string): Promise<boolean> {
    return (await this.liveSignIn(grantId)) !== undefined;
  }

  /** The account of a sign-in that still holds (see signInLive); undefined when it has ended. */
  async liveSignIn(grantId: string): Promise<{ readonly accountId: string } | undefined> {
    const grant = await this.#d.grants.live(grantId);
    return grant !== undefined && (await this.#d.epochOf(grant.accountId)) === grant.accountEpoch ? { accountId: grant.accountId } : undefined;
  }
}
