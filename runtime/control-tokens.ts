import type { Clock } from '../actors/clock.js';
import type { RegistrySigningKeys } from '../identity/signing-keys.js';
import type { RuntimeCaller } from '../transport/http/credentials.js';

/** Its own type and audience: no API that takes a runtime access token accepts it, and it accepts no lease claims. */
export const CONTROL_TOKEN_TYPE = 'runtime-control+jwt';
export const CONTROL_AUDIENCE = 'registry-runtime-control';
export const CONTROL_TOKEN_TTL_S = 5 * 60;

export interface ControlClaims {
  readonly sessionId: string;
  /** The sign-in (OAuth grant) the token was issued under: the channel checks it online, as every Runtime call does. */
  readonly grantId: string;
  /** The pairwise actor id, as in the runtime token: the account is found from the sign-in, online. */
  readonly actorId: string;
  readonly environmentId: string;
  readonly origin: string;
}

/**
 * The control channel's credential: read-only, bound to one Runtime session and its origin, short-lived. The page
 * can read it (a JWS is signed, not sealed), so it names the person only as the Environment already knows them: the
 * pairwise actor id. The account id would be the same in every Environment and link their actor ids.
 */
export class ControlTokens {
  constructor(
    private readonly keys: RegistrySigningKeys,
    private readonly clock: Clock,
    private readonly issuer: () => string,
  ) {}

  issue(caller: RuntimeCaller, sessionId: string): Promise<{ token: string; expiresAt: number }> {
    return this.keys.sign(
      { sub: caller.actorId, sid: caller.grantId, rts: sessionId, env: caller.environmentId, origin: caller.origin },
      { typ: CONTROL_TOKEN_TYPE, issuer: this.issuer(), audience: CONTROL_AUDIENCE, expiresInSeconds: CONTROL_TOKEN_TTL_S, clock: this.clock },
    );
  }

  /** The claims of a valid control token; 'expired' for a genuine one past its time; undefined for anything else. */
  async verify(token: string): Promise<ControlClaims | 'expired' | undefined> {
    try {
      const p = await this.keys.verify(token, { typ: CONTROL_TOKEN_TYPE, issuer: this.issuer(), audience: CONTROL_AUDIENCE, clock: this.clock });
      if (typeof p.sub !== 'string' || typeof p.sid !== 'string' || typeof p.rts !== 'string' || typeof p.env !== 'string' || typeof p.origin !== 'string') return undefined;
      return { sessionId: p.rts, grantId: p.sid, actorId: p.sub, environmentId: p.env, origin: p.origin };
    } catch (error) {
      // jose checks the signature before the time claims, so only a token this registry signed is reported expired.
      return (error as { code?: string }).code === 'ERR_JWT_EXPIRED' ? 'expired' : undefined;
    }
  }
}
