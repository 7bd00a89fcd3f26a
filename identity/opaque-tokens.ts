import { createHmac, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../storage/database.js';
import { randomView } from './ids.js';

/**
 * Opaque bearer secrets (cookies, refresh tokens, authorization codes): 256 random bits behind a type prefix, stored
 * only as their SHA-256. The prefix makes a leaked secret recognisable to secret scanners and to a person reading logs.
 */
export function newOpaqueToken(prefix: string): { token: string; hash: string } {
  const token = `${prefix}_${randomView(32).toString('base64url')}`;
  return { token, hash: hashToken(token) };
}

export function hashToken(token: string): string {
  // One-shot: a Hash object per call cost more than the digest (three per token exchange).
  return hash('sha256', token, 'base64url');
}

/**
 * Keys for the registry's own HMACs (pairwise actor ids, CSRF tokens), created once in Postgres so every node and
 * every restart derives the same values.
 */
export class RegistrySecrets {
  readonly #secrets: ReadonlyMap<string, Buffer>;

  private constructor(secrets: ReadonlyMap<string, Buffer>) {
    this.#secrets = secrets;
  }

  static async load(db: Kysely<Database>, names: readonly string[]): Promise<RegistrySecrets> {
    await db
      .insertInto('registry_secrets')
      .values(names.map((name) => ({ name, secret: randomBytes(32) })))
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    const rows = await db.selectFrom('registry_secrets').select(['name', 'secret']).where('name', 'in', names).execute();
    return new RegistrySecrets(new Map(rows.map((r) => [r.name, r.secret])));
  }

  /** HMAC-SHA-256 of `message` under the named key, base64url. */
  mac(name: string, message: string): string {
    const key = this.#secrets.get(name);
    if (!key) throw new Error(`registry secret ${name} was not loaded`);
    return createHmac('sha256', key).update(message).digest('base64url');
  }
}

export function sameSecret(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
