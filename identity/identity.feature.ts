import { identityKinds } from '../actors/identity.actors.js';
import type { ServerParts, ServerServices } from '../server/server.js';
import { scheduleSweep } from '../storage/sweep.js';
import { bearerToken, type CredentialRequirements, type CredentialVerifier, type IncomingRequest, type Principal } from '../transport/http/credentials.js';
import { HttpError } from '../transport/http/errors.js';
import { accountSessionRoutes } from '../transport/http/routes/account-sessions.routes.js';
import { enrolmentRoutes } from '../transport/http/routes/enrolment.routes.js';
import { managementSessionRoutes } from '../transport/http/routes/management-session.routes.js';
import { oidcRoutes } from '../transport/http/routes/oidc.routes.js';
import { platformAdminRoutes } from '../transport/http/routes/platform-admin.routes.js';
import { reviewHostRoutes } from '../transport/http/routes/review-host.routes.js';
import { registryAdminRoutes } from '../transport/ops/registry-admin.routes.js';
import { signingKeyRoutes } from '../transport/ops/signing-keys.routes.js';
import { AccessRecordSweep } from './access-sweep.js';
import { AssertionUses } from './assertion-uses.js';
import { Accounts } from './accounts.js';
import { BrowserSessions, CONSOLE_COOKIE, CSRF_SECRET } from './browser-sessions.js';
import { DeviceAssertionVerifier, ReplayGuard } from './device-assertion.js';
import { EnvironmentDirectory, PAIRWISE_SECRET } from './environments.js';
import { MANAGEMENT_AUDIENCE, OAuthGrants } from './oauth-grants.js';
import { RegistrySecrets } from './opaque-tokens.js';
import { PlatformAdmins } from './platform-admins.js';
import { isCapabilityToken, ReviewerAuthorities } from './reviewer-authorities.js';
import { RegistrySigningKeys } from './signing-keys.js';
import { readCookie } from '../transport/http/cookies.js';


/** The identity services other features build on (the Runtime plane verifies tokens and follows logouts with them). */
export interface IdentityServices {
  readonly accounts: Accounts;
  readonly keys: RegistrySigningKeys;
  readonly secrets: RegistrySecrets;
  readonly directory: EnvironmentDirectory;
  readonly sessions: BrowserSessions;
  readonly admins: PlatformAdmins;
  readonly reviewers: ReviewerAuthorities;
  readonly grants: OAuthGrants;
}

const built = new WeakMap<ServerServices, Promise<IdentityServices>>();

/** One set of identity services per server, whichever feature asks first. */
export function identityServices(services: ServerServices): Promise<IdentityServices> {
  let pending = built.get(services);
  if (!pending) {
    pending = buildIdentityServices(services);
    built.set(services, pending);
  }
  return pending;
}

async function buildIdentityServices({ host, clock, storage, publicUrl, config, logger }: ServerServices): Promise<IdentityServices> {
  const db = storage.db;
  const accounts = new Accounts(host, clock);
  const [keys, secrets] = await Promise.all([RegistrySigningKeys.load(db), RegistrySecrets.load(db, [PAIRWISE_SECRET, CSRF_SECRET])]);
  const directory = new EnvironmentDirectory(db, clock, secrets);
  await directory.ensureCliClient();
  return {
    accounts,
    keys,
    secrets,
    directory,
    sessions: new BrowserSessions(db, clock, secrets, accounts.epochOf),
    admins: new PlatformAdmins(db, clock),
    reviewers: new ReviewerAuthorities(db, clock),
    grants: new OAuthGrants({
      db, clock, keys, directory, epochOf: accounts.epochOf, issuer: publicUrl, logger, refreshReuseGraceSeconds: config.refreshTokenReuseGraceSeconds,
    }),
  };
}

/**
 * Identity plugged into the server: accounts, devices and enrolment, device assertions, passports; page and console
 * sessions; OIDC for Environment and CLI clients; management sessions; the operators' registry administration.
 */
export const identityFeature: ServerParts = {
  kinds: identityKinds,
  build: async (services) => {
    const { clock, storage, publicUrl, logger, config } = services;
    const db = storage.db;
    const { accounts, keys, directory, sessions, admins, reviewers, grants } = await identityServices(services);
    const assertionUses = new AssertionUses(storage);
    const assertions = new DeviceAssertionVerifier({ lookup: accounts.lookupDevice, clock, replays: await ReplayGuard.open(clock, assertionUses, { perDevice: config.deviceAssertionsPerDevice }) });

    const deviceAssertion: CredentialVerifier = async (request, requirements) => {
      const verified = await assertions.verify(request, { bodyBound: requirements.bodyBound, allowPending: requirements.allowPendingDevice });
      return {
        credential: 'deviceAssertion',
        subject: verified.accountId,
        accountId: verified.accountId,
        deviceId: verified.deviceId,
        deviceStatus: verified.status,
        accountEpoch: verified.accountEpoch,
      };
    };

    const managementBearer: CredentialVerifier = async (request) => {
      const token = bearerToken(request.headers);
      if (!token) {
        throw new HttpError(401, 'management_token_required', 'send a management bearer: Authorization: Bearer <token>', { family: 'management' });
      }
      const grant = await grants.verifyAccessToken(token, MANAGEMENT_AUDIENCE);
      if (!grant.scopes.includes('management')) {
        throw new HttpError(403, 'insufficient_scope', 'this token was not granted the management scope', {
          family: 'management',
          headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="management"' },
        });
      }
      return { credential: 'managementBearer', subject: grant.accountId, accountId: grant.accountId, grantId: grant.id, scopes: grant.scopes };
    };

    const developerSession: CredentialVerifier = async (request, requirements: CredentialRequirements) => {
      const lookup = await sessions.fromRequest('console', request.headers);
      switch (lookup.status) {
        case 'absent':
          throw new HttpError(401, 'developer_session_required', 'sign in to the console first', { family: 'management' });
        case 'ended':
          throw new HttpError(401, 'developer_session_invalid', 'the console session has ended; sign in to the console again', { family: 'management' });
        case 'epoch_stale':
          throw new HttpError(401, 'account_epoch_stale', "the account's devices changed since this session began; sign in again", { family: 'account_policy' });
      }
      const { session } = lookup;
      if (requirements.csrf) {
        const token = request.headers['x-csrf-token'];
        if (token === undefined) throw new HttpError(403, 'csrf_required', 'this operation needs the X-CSRF-Token header of the console session', { family: 'management' });
        if (!sessions.checkCsrf(session.id, token)) throw new HttpError(403, 'csrf_invalid', 'X-CSRF-Token does not belong to this console session', { family: 'management' });
      }
      return {
        credential: 'developerSession',
        subject: session.accountId,
        accountId: session.accountId,
        grantId: session.grantId!,
        scopes: session.grantScopes,
        sessionId: session.id,
        browserId: session.browserId,
      };
    };

    /** A bearer wins when both are sent: a CLI never carries the console cookie, a browser rarely a bearer. */
    const managementIdentity: CredentialVerifier = (request, requirements) =>
      request.headers.authorization !== undefined ? managementBearer(request, requirements) : developerSession(request, requirements);

    const identify = async (request: IncomingRequest): Promise<Principal | undefined> => {
      if (request.headers.authorization === undefined && readCookie(request.headers, CONSOLE_COOKIE) === undefined) return undefined;
      try {
        return await managementIdentity(request, { bodyBound: false, allowPendingDevice: false, csrf: false });
      } catch (error) {
        if (error instanceof HttpError && error.status < 500) return undefined;
        throw error;
      }
    };

    const accessRecords = new AccessRecordSweep(db);
    const accessSweep = scheduleSweep('access records', (signal) => accessRecords.run(clock.now(), signal), {
      intervalMs: 10 * 60_000,
      firstRunMs: 60_000,
      logger,
      observer: services.metrics.sweeps,
    });
    // Every minute: at a high assertion rate a minute's ids are many rows, and expired ones serve no purpose.
    const assertionUseSweep = scheduleSweep(
      'device assertion ids',
      async () => ({ removed: await assertionUses.sweep(clock.now()), done: true }),
      { intervalMs: 60_000, logger, observer: services.metrics.sweeps },
    );

    return {
      stop: async () => {
        await Promise.all([accessSweep.stop(), assertionUseSweep.stop()]);
      },
      routes: [
        ...enrolmentRoutes({ accounts, keys, clock, issuer: publicUrl }),
        ...accountSessionRoutes({ sessions, directory, grants, admins, reviewers }),
        ...reviewHostRoutes({ accounts, reviewers }),
        ...oidcRoutes({ accounts, sessions, directory, grants, issuer: publicUrl, clock }),
        ...managementSessionRoutes({ accounts, sessions, directory, grants, admins, identify }),
        ...platformAdminRoutes({ accounts, admins, reviewers }),
      ],
      opsRoutes: [...registryAdminRoutes({ db, accounts, directory, admins }), ...signingKeyRoutes({ db, keys, clock })],
      verifiers: {
        deviceAssertion,
        reviewHostCapability: async (request, requirements) => {
          const device = await deviceAssertion(request, requirements);
          const token = request.headers['platform-review-capability'];
          if (!token) throw new HttpError(401, 'review_capability_required', 'send the review host capability in Platform-Review-Capability', { family: 'account_policy' });
          const capability = await reviewers.capability(token);
          if (!capability && device.credential === 'deviceAssertion' && isCapabilityToken(token)) {
            // Gone from the store: nothing it could do is left, so only a release (which then has nothing to do) accepts it.
            return { credential: 'reviewHostCapability', subject: device.accountId, accountId: device.accountId, deviceId: device.deviceId, capabilityId: null, capabilityLive: false };
          }
          if (!capability || device.credential !== 'deviceAssertion' || capability.deviceId !== device.deviceId) {
            throw new HttpError(401, 'review_capability_invalid', 'no such review host capability for this device', { family: 'account_policy' });
          }
          return {
            credential: 'reviewHostCapability',
            subject: capability.accountId,
            accountId: capability.accountId,
            deviceId: capability.deviceId,
            capabilityId: capability.id,
            capabilityLive: capability.live,
          };
        },
        managementBearer,
        developerSession,
        managementIdentity,
        pageSession: async (request) => {
          const lookup = await sessions.fromRequest('page', request.headers);
          if (lookup.status !== 'live') throw new HttpError(401, 'page_session_required', 'sign in with the desktop app first', { family: 'account_policy' });
          const { session } = lookup;
          return { credential: 'pageSession', subject: session.accountId, accountId: session.accountId, sessionId: session.id, browserId: session.browserId, accountEpoch: session.accountEpoch, signedInAt: session.createdAt };
        },
      },
    };
  },
};
