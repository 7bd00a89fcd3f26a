import { identityKinds } from '../actors/identity.actors.js';
import type { ServerParts } from '../server/server.js';
import { enrolmentRoutes } from '../transport/http/routes/enrolment.routes.js';
import { Accounts } from './accounts.js';
import { DeviceAssertionVerifier, ReplayGuard } from './device-assertion.js';
import { RegistrySigningKeys } from './signing-keys.js';

/** Identity plugged into the server: accounts, devices and enrolment, device assertions, passports. */
export const identityFeature: ServerParts = {
  kinds: identityKinds,
  build: async ({ host, clock, storage, config }) => {
    const accounts = new Accounts(host, clock);
    const keys = await RegistrySigningKeys.load(storage.db);
    const assertions = new DeviceAssertionVerifier({ lookup: accounts.lookupDevice, clock, replays: new ReplayGuard(clock) });
    return {
      routes: enrolmentRoutes({ accounts, keys, clock, issuer: config.publicBaseUrl ?? `http://127.0.0.1:${config.port}` }),
      verifiers: {
        deviceAssertion: async (request, requirements) => {
          const verified = await assertions.verify(request, {
            bodyBound: requirements.bodyBound,
            allowPending: requirements.allowPendingDevice,
          });
          return {
            credential: 'deviceAssertion',
            subject: verified.accountId,
            accountId: verified.accountId,
            deviceId: verified.deviceId,
            deviceStatus: verified.status,
          };
        },
      },
    };
  },
};
