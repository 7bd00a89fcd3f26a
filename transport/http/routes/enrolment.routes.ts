import * as z from 'zod';
import type { Clock } from '../../../actors/clock.js';
import { verificationCode, type Accounts } from '../../../identity/accounts.js';
import { HANDLE } from '../../../identity/ids.js';
import { acceptDeviceKey, DevicePublicKeySchema, InvalidDeviceKeyError } from '../../../identity/device-keys.js';
import { LONGEST_SIGNED_LIFETIME_S, type RegistrySigningKeys } from '../../../identity/signing-keys.js';
import { MAX_ACTIVE_DEVICES } from '../../../machines/account/account.machine.js';
import { apiSchema } from '../api-schemas.js';
import { principalAs } from '../credentials.js';
import { HttpError } from '../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { PROBLEM_TABLE_STATUSES } from './status.routes.js';

/**
 * How long a passport is valid offline (the longest any registry signature lives); online, an account epoch raised
 * since its issue ends it sooner.
 */
export const PASSPORT_TTL_SECONDS = LONGEST_SIGNED_LIFETIME_S;
export const PASSPORT_TYPE = 'passport+jwt';
export const PASSPORT_AUDIENCE = 'registry';

const idOf = (prefix: string) => z.string().regex(new RegExp(`^${prefix}_[0-9a-hjkmnp-tv-z]{26}$`));

const EnrolStartRequest = apiSchema(
  'EnrolStartRequest',
  z.strictObject({
    handle: z.string().regex(HANDLE).describe('The account: a new handle opens an account, an existing one asks to join it.'),
    device: z.strictObject({
      name: z.string().min(1).max(64).describe('Shown to the person when approving and listing devices.'),
      publicKey: DevicePublicKeySchema.describe('The device key: a public P-256 JWK. Private members are refused.'),
    }),
  }),
);

const EnrolStartResponse = apiSchema(
  'EnrolStartResponse',
  z.strictObject({
    enrolmentId: idOf('enr'),
    deviceId: idOf('dev'),
    proof: z
      .enum(['possession', 'approval'])
      .describe('`possession`: a new account; complete at once with the nonce. `approval`: an enrolled device must admit this one first.'),
    nonce: z.string().describe('Server nonce to present, under a device assertion, in `POST /v1/enrol/complete`.'),
    verificationCode: z.string().regex(/^\d{6}$/).describe('Shown on both devices during an approval.'),
    expiresAt: z.iso.datetime(),
  }),
);

const EnrolCompleteRequest = apiSchema(
  'EnrolCompleteRequest',
  z.strictObject({ enrolmentId: idOf('enr'), nonce: z.string().min(16).max(128) }),
);

const EnrolCompleteResponse = apiSchema(
  'EnrolCompleteResponse',
  z.strictObject({
    handle: z.string(),
    deviceId: idOf('dev'),
    passport: z.string().describe('Registry-signed ES256 JWT (typ `passport+jwt`) naming account, device and account epoch; keys at `/v1/auth/jwks`.'),
    passportExpiresAt: z.iso.datetime(),
  }),
);

const PendingApprovalList = apiSchema(
  'PendingApprovalList',
  z.strictObject({
    pending: z.array(
      z.strictObject({
        enrolmentId: idOf('enr'),
        deviceName: z.string(),
        keyThumbprint: z.string(),
        verificationCode: z.string(),
        requestedAt: z.iso.datetime(),
        expiresAt: z.iso.datetime(),
      }),
    ),
  }),
);

const EnrolApproveRequest = apiSchema(
  'EnrolApproveRequest',
  z.strictObject({ enrolmentId: idOf('enr'), decision: z.enum(['admit', 'refuse']) }),
);

const DeviceListResponse = apiSchema(
  'DeviceListResponse',
  z.strictObject({
    devices: z.array(
      z.strictObject({
        deviceId: idOf('dev'),
        name: z.string(),
        keyThumbprint: z.string(),
        enrolledAt: z.iso.datetime(),
        current: z.boolean().describe('True for the device that made this request.'),
      }),
    ),
  }),
);

const PassportIntrospectionRequest = apiSchema('PassportIntrospectionRequest', z.strictObject({ passport: z.string().min(1).max(4096) }));

const PassportIntrospection = apiSchema(
  'PassportIntrospection',
  z.strictObject({
    active: z.boolean(),
    reason: z
      .enum(['invalid', 'expired', 'account_epoch_stale', 'device_not_active'])
      .optional()
      .describe('Why an inactive passport is inactive.'),
  }),
  'Whether a passport still works online: valid signature and expiry, its device active, its account epoch current.',
);

const Jwks = apiSchema(
  'JsonWebKeySet',
  z.object({ keys: z.array(z.looseObject({ kty: z.string(), kid: z.string() })) }),
  'Public keys that verify registry-signed tokens (passports).',
);

export interface EnrolmentDependencies {
  readonly accounts: Accounts;
  readonly keys: RegistrySigningKeys;
  readonly clock: Clock;
  readonly issuer: () => string;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export function enrolmentRoutes(deps: EnrolmentDependencies): AnyRoute[] {
  const common = { tags: ['Devices'], errorFormat: 'problem', errors: PROBLEM_TABLE_STATUSES } as const;
  const device = { ...common, credential: 'deviceAssertion' } as const;
  return [
    defineRoute({
      ...common,
      operationId: 'startEnrolment',
      method: 'post',
      path: '/v1/enrol/start',
      summary: 'Start enrolling a device',
      description:
        'Names an account by handle and a device key. A new handle opens an account whose first device proves ' +
        'possession of its key (`proof: possession`); an existing handle asks to join that account, which an ' +
        'enrolled device must admit (`proof: approval`). Either way the device then calls `POST /v1/enrol/complete` ' +
        'under a device assertion made with the new key, presenting the nonce. Enrolments expire after 10 minutes; the ' +
        'handle of a new account whose enrolment expired is free again at once (409 `handle_unavailable` only while ' +
        "another person's first enrolment of it is under way). " +
        'Limited to 10 per minute per client address (bursts of 20): over it, 429 `rate_limited` with Retry-After. ' +
        'An account keeps at most 5 requests waiting for approval: a new one takes the place of the oldest request ' +
        'of whichever client address holds the most, so one address flooding the list displaces only its own.',
      credential: 'none',
      // Unauthenticated and it reserves handles: bounded per client address.
      rateLimit: { perMinute: 10, burst: 20, by: 'address' },
      body: EnrolStartRequest,
      responses: { 201: { description: 'Enrolment started.', schema: EnrolStartResponse } },
      handler: async ({ body, remoteAddress }) => {
        let key;
        try {
          key = await acceptDeviceKey(body.device.publicKey);
        } catch (error) {
          if (error instanceof InvalidDeviceKeyError) {
            throw new HttpError(400, 'device_key_invalid', error.message, {
              details: [{ pointer: '/device/publicKey', in: 'body', code: 'device_key_invalid', message: error.message }],
            });
          }
          throw error;
        }
        const started = await deps.accounts.startEnrolment({
          handle: body.handle,
          deviceName: body.device.name,
          publicKey: key.publicKey,
          thumbprint: key.thumbprint,
          clientAddress: remoteAddress,
        });
        return { status: 201, body: { ...started, expiresAt: iso(started.expiresAt) } };
      },
    }),
    defineRoute({
      ...device,
      operationId: 'completeEnrolment',
      method: 'post',
      path: '/v1/enrol/complete',
      summary: 'Complete a device enrolment and receive a passport',
      description:
        'Called by the enrolling device, under a body-bound device assertion made with its new key, with the nonce ' +
        'from `start`. For an approval enrolment, answers 409 `enrolment_pending` until an enrolled device admits ' +
        'it, 403 `enrolment_refused` if it refused and 409 `device_limit_reached` when the account holds ' +
        `${MAX_ACTIVE_DEVICES} active devices already.\n\n` +
        '**Repeatable.** Once completed, the same request from the same device (same `enrolmentId` and `nonce`, a fresh ' +
        'assertion) is answered again, with a new passport under the current account epoch, for as long as the device ' +
        'stays enrolled: a client that lost the first answer retries, and a kept device renews its passport after a ' +
        'removal, `revoke-all` or a sign-out elsewhere raised the epoch.',
      bodyBound: true,
      allowPendingDevice: true,
      body: EnrolCompleteRequest,
      responses: { 201: { description: 'The device is enrolled.', schema: EnrolCompleteResponse } },
      handler: async ({ body, principal }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        const account = await deps.accounts.account(caller.accountId);
        const mine = account.enrolments[body.enrolmentId]?.device.id === caller.deviceId || account.devices[caller.deviceId]?.enrolment?.id === body.enrolmentId;
        if (!mine) {
          throw new HttpError(404, 'enrolment_not_found', 'no such enrolment for this device', { family: 'account_policy' });
        }
        const done = await deps.accounts.completeEnrolment(caller.accountId, body.enrolmentId, body.nonce);
        const passport = await deps.keys.sign(
          { sub: caller.accountId, dev: done.deviceId, aep: done.epoch },
          { typ: PASSPORT_TYPE, issuer: deps.issuer(), audience: PASSPORT_AUDIENCE, expiresInSeconds: PASSPORT_TTL_SECONDS, clock: deps.clock },
        );
        return {
          status: 201,
          body: {
            handle: done.handle,
            deviceId: done.deviceId,
            passport: passport.token,
            passportExpiresAt: iso(passport.expiresAt),
          },
        };
      },
    }),
    defineRoute({
      ...device,
      operationId: 'listPendingEnrolments',
      method: 'get',
      path: '/v1/enrol/pending',
      summary: 'Devices waiting to join this account',
      responses: { 200: { description: 'Enrolments awaiting a decision.', schema: PendingApprovalList } },
      handler: async ({ principal }) => {
        const account = await deps.accounts.account(principalAs(principal, 'deviceAssertion').accountId);
        const now = deps.clock.now();
        const pending = Object.values(account.enrolments)
          .filter((e) => e.mode === 'approval' && e.decision === 'pending' && e.expiresAt > now)
          .map((e) => ({
            enrolmentId: e.enrolmentId,
            deviceName: e.device.name,
            keyThumbprint: e.device.thumbprint,
            verificationCode: verificationCode(e.device.thumbprint, e.nonceHash),
            requestedAt: iso(e.requestedAt),
            expiresAt: iso(e.expiresAt),
          }));
        return { status: 200, body: { pending } };
      },
    }),
    defineRoute({
      ...device,
      operationId: 'decideEnrolment',
      method: 'post',
      path: '/v1/enrol/approve',
      summary: 'Admit or refuse a device waiting to join this account',
      description:
        `An account holds at most ${MAX_ACTIVE_DEVICES} active devices: admitting another is 409 \`device_limit_reached\` ` +
        '(remove one first), and so is completing an admission made while a place was free once others took them all.',
      bodyBound: true,
      body: EnrolApproveRequest,
      responses: { 204: { description: 'Decision recorded.' } },
      handler: async ({ body, principal }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        await deps.accounts.decide(caller.accountId, caller.deviceId, body.enrolmentId, body.decision);
        return { status: 204, body: undefined };
      },
    }),
    defineRoute({
      ...device,
      operationId: 'listDevices',
      method: 'get',
      path: '/v1/account/devices',
      summary: "The account's enrolled devices",
      responses: { 200: { description: 'Active devices.', schema: DeviceListResponse } },
      handler: async ({ principal }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        const account = await deps.accounts.account(caller.accountId);
        const devices = Object.values(account.devices)
          .filter((d) => d.status === 'active')
          .map((d) => ({ deviceId: d.id, name: d.name, keyThumbprint: d.thumbprint, enrolledAt: iso(d.enrolledAt), current: d.id === caller.deviceId }));
        return { status: 200, body: { devices } };
      },
    }),
    defineRoute({
      ...device,
      operationId: 'removeDevice',
      method: 'delete',
      path: '/v1/account/devices/{deviceId}',
      summary: 'Remove a device; raises the account epoch',
      description:
        'Passports, page sessions and tokens issued under an older account epoch stop working online, the kept ' +
        "devices' too: each renews its passport by repeating its `POST /v1/enrol/complete`. The account's only active " +
        'device cannot be removed (`409 last_device`; see sign-out).',
      params: z.strictObject({ deviceId: idOf('dev') }),
      responses: { 200: { description: 'Removed.' } },
      handler: async ({ params, principal }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        await deps.accounts.removeDevice(caller.accountId, caller.deviceId, params.deviceId);
        return { status: 200, body: undefined };
      },
    }),
    defineRoute({
      ...device,
      operationId: 'revokeOtherDevices',
      method: 'post',
      path: '/v1/account/devices/revoke-all',
      summary: 'Sign out every other device; keeps this one',
      responses: { 200: { description: 'Every other device is removed.' } },
      handler: async ({ principal }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        await deps.accounts.revokeOthers(caller.accountId, caller.deviceId);
        return { status: 200, body: undefined };
      },
    }),
    defineRoute({
      ...device,
      operationId: 'signOutDevice',
      method: 'post',
      path: '/v1/account/sign-out',
      summary: "End this device's enrolment",
      description:
        'The only active device of an account is refused (`409 last_device`): a further device joins only when an ' +
        'enrolled one admits it, so nothing could ever enter the account again. Enrol another device first.',
      responses: { 204: { description: 'This device is no longer enrolled.' } },
      handler: async ({ principal }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        await deps.accounts.signOut(caller.accountId, caller.deviceId);
        return { status: 204, body: undefined };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'introspectPassport',
      method: 'post',
      path: '/v1/auth/passports/introspect',
      summary: 'Is this passport still good online?',
      description:
        'Offline, a passport is checked against the JWKS. Online, this also answers whether its device is still active ' +
        'and its account epoch current: removing a device, revoking the others or signing out ends every passport ' +
        'issued before. Limited to 600 per minute per client address.',
      credential: 'none',
      rateLimit: { perMinute: 600, burst: 100, by: 'address' },
      body: PassportIntrospectionRequest,
      responses: { 200: { description: 'The verdict.', schema: PassportIntrospection } },
      handler: async ({ body }) => {
        let claims;
        try {
          claims = await deps.keys.verify(body.passport, { typ: PASSPORT_TYPE, issuer: deps.issuer(), audience: PASSPORT_AUDIENCE, clock: deps.clock });
        } catch (error) {
          const expired = (error as { code?: string }).code === 'ERR_JWT_EXPIRED';
          return { status: 200, body: { active: false, reason: expired ? ('expired' as const) : ('invalid' as const) } };
        }
        if (typeof claims.sub !== 'string' || typeof claims.dev !== 'string' || typeof claims.aep !== 'number') {
          return { status: 200, body: { active: false, reason: 'invalid' as const } };
        }
        const account = await deps.accounts.account(claims.sub);
        if (account.devices[claims.dev]?.status !== 'active') return { status: 200, body: { active: false, reason: 'device_not_active' as const } };
        if (account.epoch !== claims.aep) return { status: 200, body: { active: false, reason: 'account_epoch_stale' as const } };
        return { status: 200, body: { active: true } };
      },
    }),
    defineRoute({
      operationId: 'getRegistryJwks',
      method: 'get',
      path: '/v1/auth/jwks',
      summary: 'Registry signing keys',
      description: 'Public keys (JWKS) verifying passports offline.',
      tags: ['Devices'],
      credential: 'none',
      errorFormat: 'problem',
      errors: PROBLEM_TABLE_STATUSES,
      responses: { 200: { description: 'The key set.', schema: Jwks } },
      handler: async () => ({ status: 200, body: { keys: [...deps.keys.jwks.keys] } }),
    }),
  ];
}
