import { createHash, randomBytes } from 'node:crypto';
import type { EventObject } from 'xstate';
import type { ActorHost } from '../actors/actor-host.js';
import type { ActorReply } from '../actors/activation.js';
import type { Clock } from '../actors/clock.js';
import { MAX_ACTIVE_DEVICES, type AccountContext } from '../machines/account/account.machine.js';
import type { AccountEmitted, AccountRefusalCode, DevicePublicKey } from '../machines/account/account.events.js';
import type { AccountHandleContext, AccountHandleEmitted } from '../machines/account-handle/account-handle.machine.js';
import type { DeviceEmitted } from '../machines/device/device.machine.js';
import { clientBucket } from '../transport/http/client-address.js';
import { HttpError } from '../transport/http/errors.js';
import { DeviceKeyCache } from './device-keys.js';
import type { DeviceKeyLookup } from './device-assertion.js';
import { HANDLE, newId } from './ids.js';

/** How long an enrolment may take before its nonce, its pending device and (for a new account) its handle lapse. */
export const ENROLMENT_TTL_MS = 10 * 60_000;
const HANDLE_RESERVATION_MARGIN_MS = 60 * 60_000;
/**
 * How long after its reservation a handle's account may still be unopened because its start is under way. Past it,
 * the start died between reserving the handle and opening the account (a crash, a storage error), and a new start may
 * take the handle over rather than wait out the reservation.
 */
const UNOPENED_HOLDER_GRACE_MS = 60_000;

const REFUSALS: Readonly<Record<AccountRefusalCode, readonly [number, string]>> = {
  account_not_open: [404, 'the account does not exist or is not open'],
  enrolment_not_found: [404, 'no such enrolment, or it has expired'],
  enrolment_pending: [409, 'an enrolled device has not yet admitted this one'],
  enrolment_refused: [403, 'an enrolled device refused this enrolment'],
  enrolment_proof_invalid: [403, 'the enrolment proof does not match'],
  enrolment_already_decided: [409, 'this enrolment was already admitted or refused'],
  device_not_found: [404, 'no such active device on this account'],
  device_not_active: [403, 'the calling device is not an active device of this account'],
  device_limit_reached: [409, `the account holds ${MAX_ACTIVE_DEVICES} active devices, the most it may: remove one first`],
  last_device: [409, 'the only active device of an account cannot end its enrolment (nothing could admit a device again): enrol another device first'],
};

export interface EnrolmentStarted {
  readonly enrolmentId: string;
  readonly deviceId: string;
  readonly proof: 'possession' | 'approval';
  readonly nonce: string;
  readonly verificationCode: string;
  readonly expiresAt: number;
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('base64url');

/**
 * Accounts and their devices, over the account, handle and device actors. Each operation is one or two events; the
 * machines decide, this class translates their outcome into results and HTTP refusals.
 */
export class Accounts {
  readonly #host: ActorHost;
  readonly #clock: Clock;
  readonly #keys = new DeviceKeyCache();
  /** Device id → account id: assigned once and never changed, so it is cached (bounded). */
  readonly #deviceAccounts = new Map<string, string>();
  readonly #epochListeners: Array<(accountId: string) => void> = [];

  constructor(host: ActorHost, clock: Clock) {
    this.#host = host;
    this.#clock = clock;
  }

  /**
   * `clientAddress`: where the request came from; the account keeps only a digest of its bucket (an IPv4 address or
   * an IPv6 /64: clientBucket), to share its approval list fairly.
   */
  async startEnrolment(input: { handle: string; deviceName: string; publicKey: DevicePublicKey; thumbprint: string; clientAddress: string }): Promise<EnrolmentStarted> {
    const enrolmentId = newId('enr');
    const deviceId = newId('dev');
    const nonce = randomBytes(32).toString('base64url');
    const expiresAt = this.#clock.now() + ENROLMENT_TTL_MS;
    const enrolment = {
      enrolmentId,
      device: { id: deviceId, name: input.deviceName, publicKey: input.publicKey, thumbprint: input.thumbprint },
      nonceHash: sha256(nonce),
      expiresAt,
      requester: sha256(clientBucket(input.clientAddress)).slice(0, 22),
    };
    const newAccountId = newId('acc');
    // The reservation outlives the enrolment by a margin, so a crash between completing the account and binding the
    // handle cannot free the handle under a live account before the client's retry binds it.
    const reserve = async (replaces?: string) => {
      const reply = await this.#host.send('account-handle', input.handle, {
        type: 'handle.reserve',
        accountId: newAccountId,
        expiresAt: expiresAt + HANDLE_RESERVATION_MARGIN_MS,
        ...(replaces === undefined ? {} : { replaces }),
      });
      return { claim: this.#emitted<AccountHandleEmitted>(reply), reservedUntil: (reply.snapshot.context as AccountHandleContext).reservedUntil };
    };
    const first = await reserve();
    let claim = first.claim;
    if (claim?.type === 'handle.taken' && !claim.bound && (await this.#abandon(claim.accountId, first.reservedUntil, input.thumbprint))) claim = (await reserve(claim.accountId)).claim;
    let accountId: string;
    let proof: EnrolmentStarted['proof'];
    if (claim?.type === 'handle.reserved' && claim.accountId === newAccountId) {
      accountId = newAccountId;
      proof = 'possession';
      await this.#assignDevice(deviceId, accountId, expiresAt);
      const opened = await this.#host.send('account', accountId, { type: 'account.open', handle: input.handle, enrolment });
      // Ignored: a start that took this long was taken for dead, and its account abandoned for the handle's next start.
      if (opened.emitted.length === 0) throw handleUnavailable();
      this.#outcome(opened);
    } else if (claim?.type === 'handle.taken' && claim.bound) {
      accountId = claim.accountId;
      proof = 'approval';
      await this.#assignDevice(deviceId, accountId, expiresAt);
      this.#outcome(await this.#host.send('account', accountId, { type: 'account.enrolment.request', enrolment }));
    } else {
      throw handleUnavailable();
    }
    return { enrolmentId, deviceId, proof, nonce, verificationCode: verificationCode(input.thumbprint, enrolment.nonceHash), expiresAt };
  }

  async completeEnrolment(accountId: string, enrolmentId: string, nonce: string): Promise<{ deviceId: string; epoch: number; handle: string }> {
    const complete = (deviceKept: boolean) =>
      this.#host.send('account', accountId, { type: 'account.enrolment.complete', enrolmentId, nonceHash: sha256(nonce), deviceKept });
    let reply = await complete(false);
    let outcome = this.#outcome(reply);
    if (outcome.type === 'account.enrolmentAdmissible') {
      // The device actor would lapse at the enrolment's deadline, and retired, name no account: it is kept before the
      // account admits it. Kept and then not admitted (expired in between) it only stays stored.
      await this.#keepDevice(outcome.deviceId, accountId);
      reply = await complete(true);
      outcome = this.#outcome(reply);
    }
    if (outcome.type !== 'account.enrolled') throw new Error(`unexpected outcome ${outcome.type}`);
    const context = reply.snapshot.context as AccountContext;
    // Binding is idempotent, so it follows every completion, not only the first: a retry binds what a crash left unbound.
    const bound = this.#emitted<AccountHandleEmitted>(await this.#host.send('account-handle', context.handle!, { type: 'handle.bind', accountId }));
    if (bound?.type !== 'handle.bound' || bound.accountId !== accountId) {
      // Only after a crash between completion and bind, and a reservation that lapsed and was taken before the retry:
      // the registry's own inconsistency, not the client's mistake, so a 500 and an error in the log, never a passport.
      const holder = bound?.type === 'handle.taken' ? bound.accountId : 'nobody';
      throw new Error(`handle ${context.handle!} of account ${accountId} is held by ${holder}`);
    }
    return { deviceId: outcome.deviceId, epoch: outcome.epoch, handle: context.handle! };
  }

  /** The account's committed state: read in place when it is live and fully committed, else through its mailbox. */
  async account(accountId: string): Promise<AccountContext> {
    const snapshot = this.#host.peekCommitted('account', accountId) ?? (await this.#host.send('account', accountId, { type: 'account.read' })).snapshot;
    return snapshot.context as AccountContext;
  }

  /**
   * The account's committed state without activating it when it is not in memory (read from the store): for reads that
   * walk many accounts (the operators' listing), which would otherwise keep each in memory for the passivation time.
   * Undefined for an account never written.
   */
  async stored(accountId: string): Promise<AccountContext | undefined> {
    const live = this.#host.peekCommitted('account', accountId);
    if (live) return live.context as AccountContext;
    const view = await this.#host.readCommitted('account', accountId);
    return view === undefined ? undefined : (view.state as { context: AccountContext }).context;
  }

  /** The account a handle is bound to; undefined for a free or merely reserved handle. */
  async byHandle(handle: string): Promise<string | undefined> {
    if (!HANDLE.test(handle)) return undefined;
    const reply = await this.#host.send('account-handle', handle, { type: 'handle.read' });
    const context = reply.snapshot.context as AccountHandleContext;
    return context.accountId !== null && context.reservedUntil === null ? context.accountId : undefined;
  }

  /** The account's epoch: raised by every device removal; 0 for an account that never completed enrolment. */
  readonly epochOf = async (accountId: string): Promise<number> => (await this.account(accountId)).epoch;

  async decide(accountId: string, byDeviceId: string, enrolmentId: string, decision: 'admit' | 'refuse'): Promise<void> {
    this.#outcome(await this.#host.send('account', accountId, { type: 'account.enrolment.decide', enrolmentId, decision, byDeviceId }));
  }

  async removeDevice(accountId: string, byDeviceId: string, deviceId: string): Promise<number> {
    return this.#removed(accountId, await this.#host.send('account', accountId, { type: 'account.device.remove', deviceId, byDeviceId }));
  }

  async revokeOthers(accountId: string, byDeviceId: string): Promise<number> {
    return this.#removed(accountId, await this.#host.send('account', accountId, { type: 'account.devices.revokeOthers', byDeviceId }));
  }

  async signOut(accountId: string, deviceId: string): Promise<number> {
    return this.#removed(accountId, await this.#host.send('account', accountId, { type: 'account.signOut', deviceId }));
  }

  /** The device key lookup behind device assertions: device id → account → that device's key and status. */
  readonly lookupDevice: DeviceKeyLookup = async (deviceId) => {
    if (!/^dev_[0-9a-hjkmnp-tv-z]{26}$/.test(deviceId)) return undefined;
    let accountId = this.#deviceAccounts.get(deviceId);
    if (!accountId) {
      // An unknown id is not cached: junk assertions name a fresh id each time, so such a cache would not spare the
      // store read it costs; the host keeps no activation for it (the device actor was never created).
      const directory = await this.#host.send('device', deviceId, { type: 'device.read' });
      const assigned = (directory.snapshot.context as { accountId: string | null }).accountId;
      if (!assigned) return undefined;
      if (this.#deviceAccounts.size >= 100_000) this.#deviceAccounts.delete(this.#deviceAccounts.keys().next().value!);
      this.#deviceAccounts.set(deviceId, (accountId = assigned));
    }
    const account = await this.account(accountId);
    const enrolled = account.devices[deviceId];
    const device = enrolled ?? Object.values(account.enrolments).find((e) => e.device.id === deviceId)?.device;
    if (!device) return undefined;
    const status = enrolled ? (enrolled.status === 'active' ? 'active' : 'removed') : 'pending';
    const key = this.#keys.get(device.publicKey, device.thumbprint);
    return { deviceId, accountId, status, key, thumbprint: device.thumbprint, accountEpoch: account.epoch };
  };

  /**
   * Whether the account holding a reservation was abandoned: its first enrolment lapsed (ended here if it is past its
   * deadline and its timer has not come yet), so it can never complete, or it was never opened though the handle was
   * reserved for it longer ago than a start takes (`reservedUntil`: the reservation's end), so its start died in
   * between, or its first enrolment is of the key asking again (`thumbprint`: a start whose answer was lost). One that
   * was opened and completed, even with its handle still unbound (a crash before the bind), has devices and is never
   * abandoned.
   */
  async #abandon(accountId: string, reservedUntil: number | null, thumbprint: string): Promise<boolean> {
    const account = await this.account(accountId);
    if (Object.keys(account.devices).length > 0) return false;
    if (account.handle === null) {
      const reservedAt = reservedUntil === null ? undefined : reservedUntil - HANDLE_RESERVATION_MARGIN_MS - ENROLMENT_TTL_MS;
      if (reservedAt === undefined || this.#clock.now() - reservedAt < UNOPENED_HOLDER_GRACE_MS) return false;
    } else if (Object.keys(account.enrolments).length === 0) return true;
    const reply = await this.#host.send('account', accountId, { type: 'account.lapse', thumbprint });
    // Its timer may have abandoned it since the read (then the lapse finds nothing to do): abandoned all the same.
    return this.#emitted<AccountEmitted>(reply)?.type === 'account.lapsed' || reply.snapshot.value === 'abandoned';
  }

  /** `expiresAt`: the enrolment's deadline, at which the device lapses unless its account is about to admit it. */
  async #assignDevice(deviceId: string, accountId: string, expiresAt: number): Promise<void> {
    const outcome = this.#emitted<DeviceEmitted>(await this.#host.send('device', deviceId, { type: 'device.assign', accountId, expiresAt }));
    if (outcome?.type !== 'device.assigned') throw new Error(`device id ${deviceId} collided`);
  }

  async #keepDevice(deviceId: string, accountId: string): Promise<void> {
    const reply = await this.#host.send('device', deviceId, { type: 'device.keep', accountId });
    if (reply.snapshot.value !== 'kept') {
      const [status, message] = REFUSALS.enrolment_not_found;
      throw new HttpError(status, 'enrolment_not_found', message, { family: 'account_policy' });
    }
  }

  /**
   * Other planes end at once what a raised epoch ends (open sockets made under an older sign-in); it is committed
   * already, so a listener's failure is theirs to handle, and they re-check on their own schedule as well.
   */
  onEpochRaised(listener: (accountId: string) => void): void {
    this.#epochListeners.push(listener);
  }

  async #removed(accountId: string, reply: ActorReply): Promise<number> {
    const outcome = this.#outcome(reply);
    if (outcome.type !== 'account.devicesRemoved') throw new Error(`unexpected outcome ${outcome.type}`);
    for (const listener of this.#epochListeners) listener(accountId);
    // Best effort, after the removal committed: a device actor left unended only stays stored, naming its account,
    // which holds no such device (a lookup finds none either way).
    await Promise.allSettled(outcome.forgotten.map((deviceId) => this.#host.send('device', deviceId, { type: 'device.forget', accountId })));
    return outcome.epoch;
  }

  #outcome(reply: ActorReply): Exclude<AccountEmitted, { type: 'account.refused' }> {
    const outcome = this.#emitted<AccountEmitted>(reply);
    if (!outcome) {
      const [status, message] = REFUSALS.account_not_open;
      throw new HttpError(status, 'account_not_open', message, { family: 'account_policy' });
    }
    if (outcome.type === 'account.refused') {
      const [status, message] = REFUSALS[outcome.code];
      throw new HttpError(status, outcome.code, message, { family: 'account_policy' });
    }
    return outcome;
  }

  #emitted<T extends EventObject>(reply: ActorReply): T | undefined {
    return reply.emitted[0] as T | undefined;
  }
}

const handleUnavailable = (): HttpError =>
  new HttpError(409, 'handle_unavailable', 'this handle is being enrolled by someone else right now', { family: 'account_policy' });

/**
 * Six digits both devices show during an approval, so the person can tell their device from a stranger's: derived
 * from the enrolling key's thumbprint and the nonce's hash, which both the server and the enrolling device know.
 */
export function verificationCode(thumbprint: string, nonceHash: string): string {
  const digest = createHash('sha256').update(`${thumbprint}.${nonceHash}`).digest();
  return String(digest.readUInt32BE(0) % 1_000_000).padStart(6, '0');
}
