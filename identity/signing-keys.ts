import { createPrivateKey, randomUUID, sign, type KeyObject } from 'node:crypto';
import { compactVerify, exportJWK, generateKeyPair, jwtVerify, createLocalJWKSet, type JWK, type JWTPayload } from 'jose';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Clock } from '../actors/clock.js';
import type { Database } from '../storage/database.js';
import { writeAudit } from './audit.js';

/**
 * The registry's own ES256 signing keys: passports now, OIDC tokens later. Keys live in Postgres so every node signs
 * with the same key and a restart keeps tokens valid; the public halves are published as a JWKS, so anyone can verify
 * offline. The newest unretired key signs; retired keys stay published until what they signed has expired
 * (`rotate`, run by operators through `registry-admin signing-keys rotate`).
 */
/** A published public key: always identified and typed. */
export type PublishedJwk = JWK & { readonly kid: string; readonly kty: string };

/**
 * The longest anything this registry signs may live (a passport's 30 days). A retired key stays published this long,
 * so everything it signed verifies until it expires, and no longer.
 */
export const LONGEST_SIGNED_LIFETIME_S = 30 * 24 * 3600;

/** A key as operators see it: never its private half. */
export interface SigningKeyView {
  readonly kid: string;
  readonly createdAt: Date;
  /** When it stopped signing; it stays published (and verifies) until what it signed has expired. */
  readonly retiredAt: Date | null;
}

export interface SigningKeyRotation {
  readonly kid: string;
  /** Keys that stopped signing now and stay published. */
  readonly retired: readonly string[];
  /** Keys no longer published: withdrawn on purpose, or retired before anything they signed could still be valid. */
  readonly removed: readonly string[];
}

interface SigningState {
  readonly signing: { readonly kid: string; readonly key: KeyObject };
  readonly jwks: { keys: PublishedJwk[] };
  readonly verifyWith: ReturnType<typeof createLocalJWKSet>;
  /** Encoded protected headers by `typ`: a handful of token types, each header the same for every token of a key. */
  readonly headers: Map<string, string>;
}

/** The signing key, then the others by when they stopped signing. */
const NEWEST_FIRST = sql`retired_at desc nulls first`;

type SigningKeyRow = { kid: string; public_jwk: PublishedJwk; private_jwk: Record<string, string>; retired_at: Date | null };

export class RegistrySigningKeys {
  /** Replaced whole by a rotation, so a signature never pairs one key's `kid` with another key's signature. */
  #state: SigningState;
  /** Rotations of this process, one at a time. */
  #rotating: Promise<unknown> = Promise.resolve();

  private constructor(rows: readonly SigningKeyRow[]) {
    this.#state = RegistrySigningKeys.#stateOf(rows);
  }

  static #stateOf(rows: readonly SigningKeyRow[]): SigningState {
    const active = rows.find((r) => r.retired_at === null);
    if (!active) throw new Error('no active signing key');
    const jwks = { keys: rows.map((r) => r.public_jwk) };
    return {
      signing: { kid: active.kid, key: createPrivateKey({ key: active.private_jwk, format: 'jwk' }) },
      jwks,
      verifyWith: createLocalJWKSet(jwks),
      headers: new Map(),
    };
  }

  static async #read(db: Kysely<Database> | Transaction<Database>): Promise<SigningKeyRow[]> {
    const rows = await db.selectFrom('signing_keys').select(['kid', 'public_jwk', 'private_jwk', 'retired_at']).orderBy(NEWEST_FIRST).orderBy('created_at', 'desc').execute();
    return rows.map((r) => ({ ...r, public_jwk: r.public_jwk as PublishedJwk }));
  }

  static async #newKey(): Promise<{ kid: string; public_jwk: string; private_jwk: string }> {
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const kid = randomUUID();
    return {
      kid,
      public_jwk: JSON.stringify({ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }),
      private_jwk: JSON.stringify(await exportJWK(privateKey)),
    };
  }

  static async load(db: Kysely<Database>): Promise<RegistrySigningKeys> {
    let rows = await RegistrySigningKeys.#read(db);
    if (!rows.some((r) => r.retired_at === null)) {
      await db
        .insertInto('signing_keys')
        .values({ ...(await RegistrySigningKeys.#newKey()), alg: 'ES256' })
        .onConflict((oc) => oc.doNothing())
        .execute();
      rows = await RegistrySigningKeys.#read(db);
    }
    return new RegistrySigningKeys(rows);
  }

  /**
   * A new key signs from now on. The key it replaces stops signing but stays published, so what it signed verifies
   * until it expires; keys retired longer ago than the longest lifetime of anything signed leave the set. `withdraw` removes every older key at once instead: for a key that may have leaked, whatever it signed
   * stops verifying. The change and its `signing_key.rotate` audit record commit together; this process signs with
   * the new key once they have. (One server owns the database, see database-owner.ts: cluster mode must tell the
   * other nodes to reload.)
   */
  rotate(
    db: Kysely<Database>,
    request: { actor: string; reason: string; withdraw: boolean; clock: Clock },
  ): Promise<SigningKeyRotation> {
    const run = this.#rotating.then(async () => {
      const fresh = await RegistrySigningKeys.#newKey();
      const now = new Date(request.clock.now());
      const { rotation, rows } = await db.transaction().execute(async (tx) => {
        // The table is a handful of rows; locking it orders this rotation after any other writer of it.
        await sql`lock table signing_keys in share row exclusive mode`.execute(tx);
        const before = await RegistrySigningKeys.#read(tx);
        const retired = before.filter((r) => r.retired_at === null).map((r) => r.kid);
        const horizon = now.getTime() - LONGEST_SIGNED_LIFETIME_S * 1000;
        const removed = before
          .filter((r) => request.withdraw || (r.retired_at !== null && r.retired_at.getTime() < horizon))
          .map((r) => r.kid);
        if (retired.length > 0) await tx.updateTable('signing_keys').set({ retired_at: now }).where('kid', 'in', retired).execute();
        if (removed.length > 0) await tx.deleteFrom('signing_keys').where('kid', 'in', removed).execute();
        await tx.insertInto('signing_keys').values({ ...fresh, alg: 'ES256', created_at: now }).execute();
        const done: SigningKeyRotation = { kid: fresh.kid, retired: retired.filter((kid) => !removed.includes(kid)), removed };
        await writeAudit(tx, { action: 'signing_key.rotate', actor: request.actor, target: `signing_key:${fresh.kid}`, reason: request.reason, data: { ...done, withdraw: request.withdraw } }, now);
        return { rotation: done, rows: await RegistrySigningKeys.#read(tx) };
      });
      this.#state = RegistrySigningKeys.#stateOf(rows);
      return rotation;
    });
    this.#rotating = run.catch(() => undefined);
    return run;
  }

  /** Every published key, newest first. */
  async list(db: Kysely<Database>): Promise<SigningKeyView[]> {
    const rows = await db.selectFrom('signing_keys').select(['kid', 'created_at', 'retired_at']).orderBy(NEWEST_FIRST).orderBy('created_at', 'desc').execute();
    return rows.map((r) => ({ kid: r.kid, createdAt: r.created_at, retiredAt: r.retired_at }));
  }

  get jwks(): { keys: readonly PublishedJwk[] } {
    return this.#state.jwks;
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
    // A longer lifetime would outlive its key's publication after a rotation: a defect of the caller, not a request.
    if (options.expiresInSeconds > LONGEST_SIGNED_LIFETIME_S) throw new Error(`${options.typ} would live longer than a retired key stays published`);
    const now = Math.floor(options.clock.now() / 1000);
    const exp = now + options.expiresInSeconds;
    const payload = Buffer.from(JSON.stringify({ ...claims, iss: options.issuer, aud: options.audience, iat: now, exp })).toString('base64url');
    const state = this.#state;
    const input = `${RegistrySigningKeys.#header(state, options.typ)}.${payload}`;
    return new Promise((resolve, reject) => {
      // IEEE P1363 (r ‖ s), as JWS requires, not OpenSSL's default DER.
      sign('sha256', Buffer.from(input), { key: state.signing.key, dsaEncoding: 'ieee-p1363' }, (error, signature) => {
        if (error) reject(error);
        else resolve({ token: `${input}.${signature.toString('base64url')}`, expiresAt: exp * 1000 });
      });
    });
  }

  static #header(state: SigningState, typ: string): string {
    let header = state.headers.get(typ);
    if (header === undefined) {
      header = Buffer.from(JSON.stringify({ alg: 'ES256', kid: state.signing.kid, typ })).toString('base64url');
      state.headers.set(typ, header);
    }
    return header;
  }

  async verify(token: string, options: { typ: string; issuer: string; audience: string; clock: Clock }): Promise<JWTPayload> {
    const { payload } = await jwtVerify(token, this.#state.verifyWith, {
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
    const { payload, protectedHeader } = await compactVerify(token, this.#state.verifyWith, { algorithms: ['ES256'] });
    if (protectedHeader.typ !== typ) throw new Error(`the token is not of type ${typ}`);
    const claims: unknown = JSON.parse(Buffer.from(payload).toString('utf8'));
    if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) throw new Error('the token carries no claims object');
    return claims as JWTPayload;
  }
}
