import type { Kysely } from 'kysely';
import * as z from 'zod';
import type { Clock } from '../../actors/clock.js';
import { ADMIN_REASON } from '../../identity/platform-admins.js';
import { LONGEST_SIGNED_LIFETIME_S, type RegistrySigningKeys } from '../../identity/signing-keys.js';
import type { Database } from '../../storage/database.js';
import { apiSchema } from '../http/api-schemas.js';
import { defineRoute, type AnyRoute } from '../http/route.js';
import { operatorOf } from './registry-admin.routes.js';

/**
 * The registry's signing keys for operators (`registry-admin signing-keys …`): which keys are published, and a
 * rotation. Never a private half.
 */
export interface SigningKeyRouteDependencies {
  readonly db: Kysely<Database>;
  readonly keys: RegistrySigningKeys;
  readonly clock: Clock;
}

const SigningKeyList = apiSchema(
  'OpsSigningKeyList',
  z.object({
    keys: z.array(
      z.object({
        kid: z.string(),
        createdAt: z.string(),
        retiredAt: z.string().optional().describe('When it stopped signing; it stays published until what it signed has expired.'),
        signing: z.boolean().describe('Whether this key signs new tokens (exactly one does).'),
      }),
    ),
  }),
);

const RotateRequest = apiSchema(
  'OpsRotateSigningKeyRequest',
  z.strictObject({
    reason: z.string().min(ADMIN_REASON.min).max(ADMIN_REASON.max),
    withdraw: z.boolean().default(false).describe('Unpublish every older key at once: whatever they signed stops verifying.'),
  }),
);

const Rotation = apiSchema(
  'OpsSigningKeyRotation',
  z.object({
    kid: z.string().describe('The key that signs from now on.'),
    retired: z.array(z.string()).describe('Keys that stopped signing and stay published.'),
    removed: z.array(z.string()).describe('Keys no longer published (withdrawn, or retired longer than anything signed lives).'),
  }),
);

export function signingKeyRoutes(deps: SigningKeyRouteDependencies): AnyRoute[] {
  const common = { tags: ['Operations'], credential: 'operator', errorFormat: 'api' } as const;
  return [
    defineRoute({
      ...common,
      operationId: 'opsListSigningKeys',
      method: 'get',
      path: '/registry/signing-keys',
      summary: "The registry's published signing keys, newest first",
      responses: { 200: { description: 'Published keys.', schema: SigningKeyList } },
      handler: async () => {
        const keys = await deps.keys.list(deps.db);
        return {
          status: 200,
          body: {
            keys: keys.map((k) => ({
              kid: k.kid,
              createdAt: k.createdAt.toISOString(),
              ...(k.retiredAt ? { retiredAt: k.retiredAt.toISOString() } : {}),
              signing: k.retiredAt === null,
            })),
          },
        };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'opsRotateSigningKey',
      method: 'post',
      path: '/registry/signing-keys/rotate',
      summary: 'Sign with a new key from now on',
      description:
        'A new ES256 key signs every token from now on (passports, access, ID and control tokens). The key it replaces ' +
        `stops signing and stays in \`/v1/auth/jwks\` for at least ${LONGEST_SIGNED_LIFETIME_S / 86_400} days, the longest ` +
        'anything signed lives, so every token it signed verifies until it expires; a rotation also unpublishes keys ' +
        'retired longer ago than that. `withdraw` unpublishes every older key at once, for a key that may have leaked: passports ' +
        'it signed fail introspection (devices renew theirs by repeating their enrolment completion) and tokens it signed ' +
        'are refused. Offline verifiers must fetch the JWKS again when they meet an unknown `kid`. Audited as ' +
        '`signing_key.rotate`.',
      body: RotateRequest,
      responses: { 200: { description: 'Rotated.', schema: Rotation } },
      handler: async ({ body, headers }) => {
        const actor = operatorOf(headers);
        const rotation = await deps.keys.rotate(deps.db, { actor, reason: body.reason, withdraw: body.withdraw, clock: deps.clock });
        return { status: 200, body: { kid: rotation.kid, retired: [...rotation.retired], removed: [...rotation.removed] } };
      },
    }),
  ];
}
