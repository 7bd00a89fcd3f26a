import { createPublicKey, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, importJWK } from 'jose';
import * as z from 'zod';
import type { DevicePublicKey } from '../machines/account/account.events.js';

const base64url32 = z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'a 32-byte base64url coordinate');

/** A device key as clients send it: a public P-256 JWK, nothing else (a private member is refused, not ignored). */
export const DevicePublicKeySchema = z.strictObject({
  kty: z.literal('EC'),
  crv: z.literal('P-256'),
  x: base64url32,
  y: base64url32,
  alg: z.literal('ES256').optional(),
  use: z.literal('sig').optional(),
});

export class InvalidDeviceKeyError extends Error {}

/** Checks that the coordinates are a point of the curve and returns the normalised key with its RFC 7638 thumbprint. */
export async function acceptDeviceKey(
  jwk: z.infer<typeof DevicePublicKeySchema>,
): Promise<{ publicKey: DevicePublicKey; thumbprint: string }> {
  const publicKey: DevicePublicKey = { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y };
  // The last of 43 characters carries 2 spare bits (RFC 4648 3.5): set, they decode to the same point, so one key would
  // have 16 spellings and as many thumbprints (the key's identity, and what its verification code is derived from).
  for (const coordinate of [jwk.x, jwk.y]) {
    if (Buffer.from(coordinate, 'base64url').toString('base64url') !== coordinate) {
      throw new InvalidDeviceKeyError('a coordinate is not canonical base64url (its unused trailing bits must be zero)');
    }
  }
  try {
    await importJWK(publicKey, 'ES256');
  } catch (error) {
    throw new InvalidDeviceKeyError(`not a P-256 public key: ${(error as Error).message}`);
  }
  return { publicKey, thumbprint: await calculateJwkThumbprint(publicKey) };
}

/**
 * Imported keys by thumbprint: importing costs more than verifying, and a device signs many requests. node:crypto
 * KeyObjects, which the assertion verifier hands straight to OpenSSL.
 */
export class DeviceKeyCache {
  readonly #keys = new Map<string, KeyObject>();
  readonly #limit: number;

  constructor(limit = 50_000) {
    this.#limit = limit;
  }

  get(publicKey: DevicePublicKey, thumbprint: string): KeyObject {
    const cached = this.#keys.get(thumbprint);
    if (cached) return cached;
    // Stored keys passed acceptDeviceKey (a point of P-256); createPublicKey checks it again.
    const key = createPublicKey({ key: { ...publicKey }, format: 'jwk' });
    if (this.#keys.size >= this.#limit) this.#keys.delete(this.#keys.keys().next().value!);
    this.#keys.set(thumbprint, key);
    return key;
  }
}
