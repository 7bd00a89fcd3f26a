import { createPrivateKey, randomUUID, sign, type KeyObject } from 'node:crypto';
import { compactVerify, exportJWK, generateKeyPair, jwtVerify, createLocalJWKSet, type JWK, type JWTPayload } from 'jose';
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
  readonly #signing: { kid: string; key: KeyObject };
  readonly #jwks: { keys: PublishedJwk[] };
  readonly #verifyWith: ReturnType<typeof createLocalJWKSet>;
  /** Encoded protected headers by `typ`: a handful of token types, each header the same for every token. */
  readonly #headers = new Map<string, string>();

  private constructor(signing: { kid: string; key: KeyObject }, jwks: { keys: PublishedJwk[] }) {
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
    const key = createPrivateKey({ key: active.private_jwk, format: 'jwk' });
    return new RegistrySigningKeys({ kid: active.kid, key }, { keys: rows.map((r) => r.public_jwk as PublishedJwk) });
  }

  get jwks(): { keys: readonly PublishedJwk[] } {
    return this.#jwks;
  }

  /**
   * Signs a token (compact JWS, ES256); `expiresAt` (ms) is the `exp` it carries, so callers never compute it a
   * second time. Signed with node:crypto on a KeyObject rather than through jose: jose signs through WebCrypto and
   * rebuilds and re-validates the header and claims on every call, which cost about three times the signature
   * itself on the token endpoint's path. What is signed is the same JWS jose would make, and jose verifies it.
   * The signature is computed on libuv's pool (≈ 3 µs more CPU than in place): the event loop goes on parsing,
   * batching and answering while it runs, and a loaded token endpoint uses both cores instead of queueing every
   * signature behind the one thread.
   */
  sign(claims: JWTPayload, options: { typ: string; issuer: string; audience: string; expiresInSeconds: number; clock: Clock }): Promise<{ token: string; expiresAt: number }> {
    const now = Math.floor(options.clock.now() / 1000);
    const exp = now + options.expiresInSeconds;
    const payload = Buffer.from(JSON.stringify({ ...claims, iss: options.issuer, aud: options.audience, iat: now, exp })).toString('base64url');
    const input = `${this.#header(options.typ)}.${payload}`;
    return new Promise((resolve, reject) => {
      // IEEE P1363 (r ‖ s), as JWS requires, not OpenSSL's default DER.
      sign('sha256', Buffer.from(input), { key: this.#signing.key, dsaEncoding: 'ieee-p1363' }, (error, signature) => {
        if (error) reject(error);
        else resolve({ token: `${input}.${signature.toString('base64url')}`, expiresAt: exp * 1000 });
      });
    });
  }

  #header(typ: string): string {
    let header = this.#headers.get(typ);
    if (header === undefined) {
      header = Buffer.from(JSON.stringify({ alg: 'ES256', kid: this.#signing.kid, typ })).toString('base64url');
      this.#headers.set(typ, header);
    }
    return header;
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

  /**
   * A token this registry signed, of type `typ`, whatever its claims say: the caller checks them. For a token that
   * still means something once expired (an `id_token_hint` names a person however old it is).
   */
  async verifySignature(token: string, typ: string): Promise<JWTPayload> {
    const { payload, protectedHeader } = await compactVerify(token, this.#verifyWith, { algorithms: ['ES256'] });
    if (protectedHeader.typ !== typ) throw new Error(`the token is not of type ${typ}`);
    const claims: unknown = JSON.parse(Buffer.from(payload).toString('utf8'));
    if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) throw new Error('the token carries no claims object');
    return claims as JWTPayload;
  }
}
