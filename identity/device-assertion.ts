import { createHash } from 'node:crypto';
import { flattenedVerify, type CryptoKey } from 'jose';
import type { Clock } from '../actors/clock.js';
import type { IncomingRequest } from '../transport/http/credentials.js';
import { HttpError } from '../transport/http/errors.js';

/**
 * The device assertion: a compact JWS in the `Platform-Device-Assertion` header, made with the device's enrolled
 * P-256 key (ES256). Modelled on DPoP (RFC 9449), bound to one request:
 *
 *   header  { "alg": "ES256", "typ": "device-assertion+jwt", "kid": "<device id>" }
 *   payload { "htm": "<METHOD>", "htu": "<path>[?<query>]", "iat": <unix seconds>, "jti": "<16-64 of A-Z a-z 0-9 _ ->",
 *             "bdh": "<base64url SHA-256 of the exact body bytes>" }
 *
 * `bdh` is required on operations bound to their body, and checked whenever present. Refused (401, Problem): a
 * missing or malformed assertion, another algorithm, a bad signature, an unknown or removed device, `iat` more than
 * `skewSeconds` from the server's time, a `jti` seen before for that device within the window, a method, path,
 * query or body other than the request's.
 */
export const DEVICE_ASSERTION_HEADER = 'platform-device-assertion';
export const DEVICE_ASSERTION_TYPE = 'device-assertion+jwt';

export interface DeviceKeyRecord {
  readonly deviceId: string;
  readonly accountId: string;
  readonly status: 'active' | 'pending' | 'removed';
  readonly key: CryptoKey;
  readonly thumbprint: string;
}

/** Finds the key of a device, whatever its status; undefined when no such device exists. */
export type DeviceKeyLookup = (deviceId: string) => Promise<DeviceKeyRecord | undefined>;

export interface VerifiedAssertion {
  readonly deviceId: string;
  readonly accountId: string;
  /** Removed devices never verify. */
  readonly status: 'active' | 'pending';
  readonly thumbprint: string;
}

interface AssertionPayload {
  htm?: unknown;
  htu?: unknown;
  iat?: unknown;
  jti?: unknown;
  bdh?: unknown;
}

const utf8 = new TextDecoder();

const refuse = (code: string, message: string): HttpError =>
  new HttpError(401, code, message, { family: 'account_policy', headers: { 'www-authenticate': 'DeviceAssertion' } });

/** Where used assertion ids are kept across restarts (AssertionUses on Postgres). */
export interface DurableAssertionUses {
  /** Resolves once `id` is stored, until `expiresAt`. */
  record(id: string, expiresAt: number): Promise<void>;
  /** Every id whose window is still open at `now`. */
  unexpired(now: number): Promise<ReadonlyArray<{ readonly id: string; readonly expiresAt: number }>>;
}

/**
 * Remembers assertion ids until they could no longer pass the time check, so each is accepted once. Memory decides
 * every check, at once and for concurrent uses of one id alike; the durable record is written before the request
 * acts and read back by `open`, so an id used before a restart is still refused after it. One process owns the
 * record (claimDatabase keeps a second server off the database; cluster mode must add a shared check).
 */
export class ReplayGuard {
  readonly #seen = new Map<string, number>();
  readonly #clock: Clock;
  readonly #durable: DurableAssertionUses;
  readonly #limit: number;
  #sweepAt = 0;

  private constructor(clock: Clock, durable: DurableAssertionUses, limit: number) {
    this.#clock = clock;
    this.#durable = durable;
    this.#limit = limit;
  }

  /** A guard that already remembers every id the durable record holds inside its window. */
  static async open(clock: Clock, durable: DurableAssertionUses, limit = 1_000_000): Promise<ReplayGuard> {
    const guard = new ReplayGuard(clock, durable, limit);
    for (const use of await durable.unexpired(clock.now())) guard.#seen.set(use.id, use.expiresAt);
    return guard;
  }

  /** True when `id` is new (and now remembered until `expiresAt`), false for a replay. */
  async firstUse(id: string, expiresAt: number): Promise<boolean> {
    const now = this.#clock.now();
    if (now >= this.#sweepAt) this.#sweep(now);
    const known = this.#seen.get(id);
    if (known !== undefined && known > now) return false;
    if (this.#seen.size >= this.#limit) {
      throw new HttpError(503, 'replay_guard_full', 'too many device assertions in flight; retry shortly', {
        family: 'coordination',
        headers: { 'retry-after': '1' },
      });
    }
    this.#seen.set(id, expiresAt);
    try {
      await this.#durable.record(id, expiresAt);
      return true;
    } catch (error) {
      // Not recorded, and the request does not act: the same assertion may be presented again once the store answers.
      this.#seen.delete(id);
      throw error;
    }
  }

  #sweep(now: number): void {
    for (const [id, expiresAt] of this.#seen) if (expiresAt <= now) this.#seen.delete(id);
    this.#sweepAt = now + 5_000;
  }
}

export class DeviceAssertionVerifier {
  readonly #lookup: DeviceKeyLookup;
  readonly #clock: Clock;
  readonly #replays: ReplayGuard;
  readonly #skewMs: number;

  constructor(deps: { lookup: DeviceKeyLookup; clock: Clock; replays: ReplayGuard; skewSeconds?: number }) {
    this.#lookup = deps.lookup;
    this.#clock = deps.clock;
    this.#replays = deps.replays;
    this.#skewMs = (deps.skewSeconds ?? 60) * 1000;
  }

  /** Verifies the request's assertion; `allowPending` admits a device whose enrolment is not complete yet. */
  async verify(request: IncomingRequest, options: { bodyBound: boolean; allowPending?: boolean }): Promise<VerifiedAssertion> {
    const jws = request.headers[DEVICE_ASSERTION_HEADER];
    if (!jws) throw refuse('device_assertion_required', 'this operation requires a Platform-Device-Assertion header');
    // Split once: the header names the key, and the same parts are then verified.
    const parts = jws.split('.');
    let kid: string;
    try {
      if (parts.length !== 3) throw new Error();
      const header = JSON.parse(Buffer.from(parts[0]!, 'base64url').toString()) as { alg?: unknown; typ?: unknown; kid?: unknown };
      if (header.alg !== 'ES256' || header.typ !== DEVICE_ASSERTION_TYPE || typeof header.kid !== 'string') throw new Error();
      kid = header.kid;
    } catch {
      throw refuse('device_assertion_invalid', 'the device assertion is not an ES256 device-assertion+jwt with a kid');
    }
    const device = await this.#lookup(kid);
    if (!device) throw refuse('device_unknown', 'the assertion names no enrolled device');
    if (device.status === 'removed') throw refuse('device_removed', 'this device was removed from its account');
    const status = device.status;
    if (status === 'pending' && !options.allowPending) {
      throw refuse('device_not_enrolled', 'this device has not completed its enrolment');
    }
    let payload: AssertionPayload;
    try {
      const verified = await flattenedVerify({ protected: parts[0]!, payload: parts[1]!, signature: parts[2]! }, device.key, {
        algorithms: ['ES256'],
      });
      const parsed: unknown = JSON.parse(utf8.decode(verified.payload));
      // A signed `null`, number or array is still not an assertion: refused here, never read as one below.
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new TypeError('the payload is not a JSON object');
      payload = parsed as AssertionPayload;
    } catch {
      throw refuse('device_assertion_invalid', 'the device assertion signature does not verify');
    }
    const target = request.query ? `${request.path}?${request.query}` : request.path;
    if (payload.htm !== request.method || payload.htu !== target) {
      throw refuse('device_assertion_mismatch', 'the assertion was made for another method, path or query');
    }
    const now = this.#clock.now();
    const iat = payload.iat;
    if (typeof iat !== 'number' || !Number.isSafeInteger(iat)) {
      // Whole seconds, so the id's expiry is a whole millisecond and survives the durable record unrounded.
      throw refuse('device_assertion_invalid', 'the assertion needs an iat of whole seconds');
    }
    // Strict: an id is remembered until `iat + skew` exclusive, so the instant it is forgotten must already be too late.
    if (!(Math.abs(iat * 1000 - now) < this.#skewMs)) {
      throw refuse('device_assertion_expired', `the assertion time is ${this.#skewMs / 1000} s or more from the server's`);
    }
    if (typeof payload.jti !== 'string' || !/^[A-Za-z0-9_-]{16,64}$/.test(payload.jti)) {
      throw refuse('device_assertion_invalid', 'the assertion needs a jti of 16 to 64 characters');
    }
    if (options.bodyBound || payload.bdh !== undefined) {
      const digest = createHash('sha256').update(request.body).digest('base64url');
      if (payload.bdh !== digest) throw refuse('device_assertion_body_mismatch', 'the assertion does not cover this body');
    }
    // Last, so that only a valid signature can spend an id.
    if (!(await this.#replays.firstUse(`${device.deviceId}:${payload.jti}`, iat * 1000 + this.#skewMs))) {
      throw refuse('device_assertion_replayed', 'this assertion was already used');
    }
    return { deviceId: device.deviceId, accountId: device.accountId, status, thumbprint: device.thumbprint };
  }
}
