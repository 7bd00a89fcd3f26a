import { createHash, verify, type KeyObject } from 'node:crypto';
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
  readonly key: KeyObject;
  readonly thumbprint: string;
  /** The account's epoch in the same state the status was read from. */
  readonly accountEpoch: number;
}

/** Finds the key of a device, whatever its status; undefined when no such device exists. */
export type DeviceKeyLookup = (deviceId: string) => Promise<DeviceKeyRecord | undefined>;

export interface VerifiedAssertion {
  readonly deviceId: string;
  readonly accountId: string;
  /** Removed devices never verify. */
  readonly status: 'active' | 'pending';
  readonly thumbprint: string;
  /** The account's epoch as of the status above (`DeviceKeyRecord.accountEpoch`). */
  readonly accountEpoch: number;
}

interface AssertionPayload {
  htm?: unknown;
  htu?: unknown;
  iat?: unknown;
  jti?: unknown;
  bdh?: unknown;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** One compact JWS part: unpadded base64url, nothing else (Buffer's decoder would skip any other character). */
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * Whether `part` is unpadded base64url of some bytes: its alphabet, and not 4k+1 characters long (RFC 4648 4: a last
 * quantum of one character encodes no byte). Buffer's decoder drops such an odd character where jose (atob) refused
 * the part, so a part the signature covers would be read as other text than it spells.
 */
const isBase64url = (part: string): boolean => part.length % 4 !== 1 && BASE64URL.test(part);
/** An ES256 signature: r ‖ s, 32 bytes each (RFC 7518 3.4), 86 base64url characters. */
const ES256_SIGNATURE_LENGTH = 86;

/** Decodes a JSON object from one base64url part; throws on anything else. */
function jsonObjectPart(part: string): Record<string, unknown> {
  if (!isBase64url(part)) throw new TypeError('not base64url');
  const parsed: unknown = JSON.parse(utf8.decode(Buffer.from(part, 'base64url')));
  // A signed `null`, number or array is still not a header or an assertion: refused, never read as one.
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new TypeError('not a JSON object');
  return parsed as Record<string, unknown>;
}

/**
 * ES256 over the JWS signing input, on libuv's pool. node:crypto directly, not jose: jose verifies through WebCrypto,
 * whose argument normalisation and copying on the event loop cost more than the curve arithmetic the pool then does
 * (the same reason the registry signs its own tokens with node:crypto). What jose would also check is checked in
 * `verify` below: the algorithm, no `crit` (RFC 7515 4.1.11: it names nothing this verifier understands), strict
 * base64url, a P1363 signature of exactly 64 bytes.
 */
function es256Verifies(signingInput: string, signature: string, key: KeyObject): Promise<boolean> {
  return new Promise((resolve, reject) => {
    verify('sha256', Buffer.from(signingInput), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(signature, 'base64url'), (error, valid) => {
      if (error) reject(error);
      else resolve(valid);
    });
  });
}

const refuse = (code: string, message: string): HttpError =>
  new HttpError(401, code, message, { family: 'account_policy', headers: { 'www-authenticate': 'DeviceAssertion' } });

/** Where used assertion ids are kept across restarts (AssertionUses on Postgres). */
export interface DurableAssertionUses {
  /** Resolves once `id` is stored, until `expiresAt`. */
  record(id: string, expiresAt: number): Promise<void>;
  /** Every id whose window is still open at `now`. */
  unexpired(now: number): Promise<ReadonlyArray<{ readonly id: string; readonly expiresAt: number }>>;
}

/** How many used ids the replay guard holds: in all, and for any one device. */
export interface ReplayGuardLimits {
  /** Every device's together: a backstop for memory; past it every device is refused 503 `replay_guard_full`. */
  readonly total?: number;
  /**
   * One device's share: past it only that device is refused (429 `device_assertion_quota_exceeded`), so one busy or
   * hostile device cannot fill the table and lock every other device out.
   */
  readonly perDevice?: number;
}

/** The memory backstop: ids held by every device together. */
export const REPLAY_GUARD_TOTAL = 1_000_000;
/**
 * An id is held until its `iat` plus the 60 s window, so a device with a right clock may sign 100 requests a second
 * sustained (bursts of 6,000): room for any honest client of the Device plane, while it takes 167 devices at their
 * share to reach the total.
 */
export const REPLAY_GUARD_PER_DEVICE = 6_000;

/** The ids of one device, and when a refusal of it was last worked out to end (no scan until then). */
interface DeviceIds {
  readonly ids: Map<string, number>;
  fullUntil: number;
}

/**
 * Remembers assertion ids until they could no longer pass the time check, so each is accepted once. Memory decides
 * every check, at once and for concurrent uses of one id alike; the durable record is written before the request
 * acts and read back by `open`, so an id used before a restart is still refused after it. One process owns the
 * record (claimDatabase keeps a second server off the database; cluster mode must add a shared check).
 *
 * Ids are `<deviceId>:<jti>` (a jti has no colon), and each device may hold `perDevice` of them at once.
 */
export class ReplayGuard {
  readonly #byDevice = new Map<string, DeviceIds>();
  /** Ids held, every device's together. */
  #size = 0;
  readonly #clock: Clock;
  readonly #durable: DurableAssertionUses;
  readonly #total: number;
  readonly #perDevice: number;
  #sweepAt = 0;

  private constructor(clock: Clock, durable: DurableAssertionUses, total: number, perDevice: number) {
    this.#clock = clock;
    this.#durable = durable;
    this.#total = total;
    this.#perDevice = perDevice;
  }

  /** A guard that already remembers every id the durable record holds inside its window. */
  static async open(clock: Clock, durable: DurableAssertionUses, limits: ReplayGuardLimits = {}): Promise<ReplayGuard> {
    const total = limits.total ?? REPLAY_GUARD_TOTAL;
    const perDevice = limits.perDevice ?? Math.min(REPLAY_GUARD_PER_DEVICE, total);
    if (!Number.isInteger(total) || total <= 0) throw new RangeError('the replay guard total must be a positive integer');
    if (!Number.isInteger(perDevice) || perDevice <= 0 || perDevice > total) {
      throw new RangeError('the replay guard per-device share must be a positive integer no larger than the total');
    }
    const guard = new ReplayGuard(clock, durable, total, perDevice);
    // Reloaded beyond the limits if the record holds more (limits lowered across a restart): they only delay admissions.
    for (const use of await durable.unexpired(clock.now())) guard.#remember(use.id, use.expiresAt);
    return guard;
  }

  /**
   * True when `id` is new (and now remembered until `expiresAt`), false for a replay. Throws 429
   * `device_assertion_quota_exceeded` when the id's device holds its share already, 503 `replay_guard_full` when all
   * devices together hold the total.
   */
  async firstUse(id: string, expiresAt: number): Promise<boolean> {
    const now = this.#clock.now();
    if (now >= this.#sweepAt) this.#sweep(now);
    const known = this.#byDevice.get(deviceOf(id))?.ids.get(id);
    if (known !== undefined) {
      if (known > now) return false;
      // Past its window but not swept yet: it holds no place in the counts below.
      this.#forget(id);
    }
    const device = this.#byDevice.get(deviceOf(id));
    if (device && device.ids.size >= this.#perDevice) this.#refuseOverShare(device, now);
    if (this.#size >= this.#total) {
      throw new HttpError(503, 'replay_guard_full', 'too many device assertions in flight; retry shortly', {
        family: 'coordination',
        headers: { 'retry-after': '1' },
      });
    }
    this.#remember(id, expiresAt);
    try {
      await this.#durable.record(id, expiresAt);
      return true;
    } catch (error) {
      // Not recorded, and the request does not act: the same assertion may be presented again once the store answers.
      this.#forget(id);
      throw error;
    }
  }

  /**
   * The device holds its share: its ids past their window (the sweep runs every 5 s) are dropped first, and if it
   * still holds its share it is refused until its earliest id leaves the window. That time is kept, so a device
   * hammering while refused costs a lookup, not a scan of its ids.
   */
  #refuseOverShare(device: DeviceIds, now: number): void {
    if (now >= device.fullUntil) {
      let earliest = Number.POSITIVE_INFINITY;
      for (const [id, expiresAt] of device.ids) {
        if (expiresAt <= now) {
          device.ids.delete(id);
          this.#size -= 1;
        } else if (expiresAt < earliest) earliest = expiresAt;
      }
      if (device.ids.size < this.#perDevice) return;
      device.fullUntil = earliest;
    }
    const seconds = Math.max(1, Math.ceil((device.fullUntil - now) / 1000));
    throw new HttpError(429, 'device_assertion_quota_exceeded', `this device has ${this.#perDevice} assertions inside their time window; retry in ${seconds} s`, {
      family: 'account_policy',
      headers: { 'retry-after': String(seconds) },
    });
  }

  #remember(id: string, expiresAt: number): void {
    const key = deviceOf(id);
    let device = this.#byDevice.get(key);
    if (!device) this.#byDevice.set(key, (device = { ids: new Map(), fullUntil: 0 }));
    if (!device.ids.has(id)) this.#size += 1;
    device.ids.set(id, expiresAt);
  }

  #forget(id: string): void {
    const key = deviceOf(id);
    const device = this.#byDevice.get(key);
    if (!device?.ids.delete(id)) return;
    this.#size -= 1;
    // A place freed before the time a refusal worked out: the next use looks again instead of refusing.
    device.fullUntil = 0;
    if (device.ids.size === 0) this.#byDevice.delete(key);
  }

  #sweep(now: number): void {
    for (const [key, device] of this.#byDevice) {
      for (const [id, expiresAt] of device.ids) {
        if (expiresAt > now) continue;
        device.ids.delete(id);
        this.#size -= 1;
      }
      if (device.ids.size === 0) this.#byDevice.delete(key);
    }
    this.#sweepAt = now + 5_000;
  }
}

/** The device part of a `<deviceId>:<jti>` id: a jti is `[A-Za-z0-9_-]`, so the last colon separates them. */
function deviceOf(id: string): string {
  const colon = id.lastIndexOf(':');
  return colon < 0 ? id : id.slice(0, colon);
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
      const header = jsonObjectPart(parts[0]!);
      if (header.alg !== 'ES256' || header.typ !== DEVICE_ASSERTION_TYPE || typeof header.kid !== 'string') throw new Error();
      if ('crit' in header || 'b64' in header) throw new Error();
      kid = header.kid;
    } catch {
      throw refuse('device_assertion_invalid', 'the device assertion is not an ES256 device-assertion+jwt with a kid (and no crit)');
    }
    const device = await this.#lookup(kid);
    if (!device) throw refuse('device_unknown', 'the assertion names no enrolled device');
    let payload: AssertionPayload;
    try {
      const signature = parts[2]!;
      if (signature.length !== ES256_SIGNATURE_LENGTH || !BASE64URL.test(signature)) throw new TypeError('not an ES256 signature');
      if (!(await es256Verifies(`${parts[0]}.${parts[1]}`, signature, device.key))) throw new Error('bad signature');
      payload = jsonObjectPart(parts[1]!);
    } catch {
      throw refuse('device_assertion_invalid', 'the device assertion signature does not verify');
    }
    // After the signature: a device's status is told only to its key's holder, never to whoever learnt its id (the
    // `kid` of any assertion it made) and sends a forged one to probe whether it was removed or is still pending.
    if (device.status === 'removed') throw refuse('device_removed', 'this device was removed from its account');
    const status = device.status;
    if (status === 'pending' && !options.allowPending) {
      throw refuse('device_not_enrolled', 'this device has not completed its enrolment');
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
    return { deviceId: device.deviceId, accountId: device.accountId, status, thumbprint: device.thumbprint, accountEpoch: device.accountEpoch };
  }
}
