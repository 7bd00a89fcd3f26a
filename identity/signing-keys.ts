import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, SignJWT, jwtVerify, createLocalJWKSet, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import type { Kysely } from 'kysely';
import type { Clock } from '../actors/clock.js';
import type { Database } from '../storage/database.js';

/**
 * The registry's own ES256 signing keys: passports now, OIDC tokens later. Keys live in Postgres so every node signs
 * with the same key and a restart keeps tokens valid; the public halves are published as a JWKS, so anyone can verify
 * offline. The newest unretired key signs; retired keys stay published until what they signed has expired.
 */
/** A published public key: always identified and typed. */
export type PublishedJwk = JWK & { readonly kid: string; readonly kty: string };

export class RegistrySigningKeys {
  readonly #signing: { kid: string; key: CryptoKey };
  readonly #jwks: { keys: PublishedJwk[] };
  readonly #verifyWith: ReturnType<typeof createLocalJWKSet>;

  private constructor(signing: { kid: string; key: CryptoKey }, jwks: { keys: PublishedJwk[] }) {
    this.#signing = signing;
    this.#jwks = jwks;
    this.#verifyWith = createLocalJWKSet(jwks);
  }

  static async load(db: Kysely<Database>): Promise<RegistrySigningKeys> {
    let rows = await db.selectFrom('signing_keys').selectAll().orderBy('created_at', 'desc').execute();
    if (!rows.some((r) => r.retired_at === null)) {
      const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
      const kid = randomUUID();
      await db
        .insertInto('signing_keys')
        .values({
          kid,
          alg: 'ES256',
          public_jwk: JSON.stringify({ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }),
          private_jwk: JSON.stringify(await exportJWK(privateKey)),
        })
        .onConflict((oc) => oc.doNothing())
        .execute();
      rows = await db.selectFrom('signing_keys').selectAll().orderBy('created_at', 'desc').execute();
    }
    const active = rows.find((r) => r.retired_at === null)!;
    const key = (await importJWK(active.private_jwk, 'ES256')) as CryptoKey;
    return new RegistrySigningKeys({ kid: active.kid, key }, { keys: rows.map((r) => r.public_jwk as PublishedJwk) });
  }

  get jwks(): { keys: readonly PublishedJwk[] } {
    return this.#jwks;
  }

  /** Signs a token; `expiresAt` (ms) is the `exp` it carries, so callers never compute it a second time. */
  async sign(
    claims: JWTPayload,
    options: { typ: string; issuer: string; audience: string; expiresInSeconds: number; clock: Clock },
  ): Promise<{ token: string; expiresAt: number }> {
    const now = Math.floor(options.clock.now() / 1000);
    const exp = now + options.expiresInSeconds;
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: this.#signing.kid, typ: options.typ })
      .setIssuer(options.issuer)
      .setAudience(options.audience)
      .setIssuedAt(now)
      .setExpirationTime(exp)
      .sign(this.#signing.key);
    return { token, expiresAt: exp * 1000 };
  }

  async verify(token: string, options: { typ: string; issuer: string; audience: string; clock: Clock }): Promise<JWTPayload> {
    const { payload } = await jwtVerify(token, this.#verifyWith, {
      typ: options.typ,
      issuer: options.issuer,
      audience: options.audience,
      algorithms: ['ES256'],
      currentDate: new Date(options.clock.now()),
    });
    return payload;
  }
}
