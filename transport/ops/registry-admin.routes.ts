import type { Kysely } from 'kysely';
import * as z from 'zod';
import type { Accounts } from '../../identity/accounts.js';
import { readAudit } from '../../identity/audit.js';
import { ENVIRONMENT_ID, type EnvironmentDirectory } from '../../identity/environments.js';
import { HANDLE } from '../../identity/ids.js';
import { ADMIN_REASON, type PlatformAdmins } from '../../identity/platform-admins.js';
import type { AccountContext } from '../../machines/account/account.machine.js';
import type { Database } from '../../storage/database.js';
import { apiSchema } from '../http/api-schemas.js';
import { HttpError } from '../http/errors.js';
import { defineRoute, type AnyRoute } from '../http/route.js';
import { OPS_PAGE_DEFAULT, OPS_PAGE_MAX, opsPageLimit } from './ops-pages.js';

/**
 * The operator listener's registry administration, behind the operators' command line (`registry-admin`). Every
 * operation goes through the same services as the public API, with the same checks and the same audit records; the
 * operator is named by `X-Operator-Name` and recorded as `operator:<name>`.
 */
export interface RegistryAdminDependencies {
  readonly db: Kysely<Database>;
  readonly accounts: Accounts;
  readonly directory: EnvironmentDirectory;
  readonly admins: PlatformAdmins;
}

const RegisterEnvironmentRequest = apiSchema(
  'OpsRegisterEnvironmentRequest',
  z.strictObject({
    environmentId: z.string().regex(ENVIRONMENT_ID),
    origin: z.string().max(2048),
    ownerHandle: z.string().regex(HANDLE),
    clientName: z.string().min(1).max(128).optional(),
    redirectUris: z.array(z.string().max(2048)).min(1).max(20),
  }),
);

const EnvironmentView = z.object({ environmentId: z.string(), origin: z.string(), ownerAccountId: z.string() });

const RegisteredEnvironment = apiSchema(
  'OpsRegisteredEnvironment',
  z.object({
    environment: EnvironmentView,
    client: z.object({ clientId: z.string(), name: z.string(), redirectUris: z.array(z.string()) }),
  }),
);

const EnvironmentList = apiSchema('OpsEnvironmentList', z.object({ environments: z.array(EnvironmentView) }));

const GrantAdminRequest = apiSchema('OpsGrantAdminRequest', z.strictObject({ reason: z.string().min(ADMIN_REASON.min).max(ADMIN_REASON.max) }));

const GrantAdminResponse = apiSchema('OpsGrantAdminResponse', z.object({ accountId: z.string(), handle: z.string(), changed: z.boolean() }));

const AccountList = apiSchema(
  'OpsAccountList',
  z.object({
    accounts: z.array(
      z.object({ accountId: z.string(), handle: z.string().nullable(), epoch: z.number().int(), activeDevices: z.number().int(), platformAdmin: z.boolean() }),
    ),
    next: z.string().optional().describe('Present on a full page: pass it as `after` for the page after it.'),
  }),
);

const DeviceList = apiSchema(
  'OpsDeviceList',
  z.object({
    accountId: z.string(),
    handle: z.string(),
    devices: z.array(
      z.object({ deviceId: z.string(), name: z.string(), status: z.enum(['active', 'removed']), keyThumbprint: z.string(), enrolledAt: z.string(), removedAt: z.string().optional() }),
    ),
  }),
);

const AuditList = apiSchema(
  'OpsAuditList',
  z.object({
    events: z.array(
      z.object({ id: z.number().int(), at: z.string(), action: z.string(), actor: z.string(), target: z.string(), reason: z.string().optional(), data: z.record(z.string(), z.unknown()) }),
    ),
  }),
);

const OPERATOR_NAME = /^[A-Za-z0-9._@-]{1,64}$/;

export function operatorOf(headers: Readonly<Record<string, string>>): string {
  const name = headers['x-operator-name'];
  if (!name || !OPERATOR_NAME.test(name)) {
    throw new HttpError(400, 'operator_name_required', 'name the operator in X-Operator-Name (1 to 64 of A-Z a-z 0-9 . _ @ -): it is written to the audit trail');
  }
  return `operator:${name}`;
}

export function registryAdminRoutes(deps: RegistryAdminDependencies): AnyRoute[] {
  const common = { tags: ['Operations'], credential: 'operator', errorFormat: 'api' } as const;
  const enrolledAccount = async (handle: string): Promise<{ accountId: string; account: AccountContext }> => {
    const accountId = await deps.accounts.byHandle(handle);
    const account = accountId ? await deps.accounts.account(accountId) : undefined;
    if (!accountId || !account || account.epoch === 0) throw new HttpError(404, 'account_not_found', `no enrolled account @${handle}`, { family: 'catalog' });
    return { accountId, account };
  };
  return [
    defineRoute({
      ...common,
      operationId: 'opsRegisterEnvironment',
      method: 'post',
      path: '/registry/environments',
      summary: 'Register an Environment and its public OIDC client',
      body: RegisterEnvironmentRequest,
      errors: [404, 409],
      responses: { 201: { description: 'Registered.', schema: RegisteredEnvironment } },
      handler: async ({ body, headers }) => {
        const actor = operatorOf(headers);
        const { accountId } = await enrolledAccount(body.ownerHandle);
        const { environment, client } = await deps.directory.register(
          { environmentId: body.environmentId, origin: body.origin, ownerAccountId: accountId, clientName: body.clientName ?? body.environmentId, redirectUris: body.redirectUris },
          actor,
        );
        return {
          status: 201,
          body: {
            environment: { environmentId: environment.id, origin: environment.origin, ownerAccountId: environment.ownerAccountId },
            client: { clientId: client.clientId, name: client.name, redirectUris: [...client.redirectUris] },
          },
        };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'opsListEnvironments',
      method: 'get',
      path: '/registry/environments',
      summary: 'Registered Environments',
      responses: { 200: { description: 'Every Environment.', schema: EnvironmentList } },
      handler: async () => ({
        status: 200,
        body: { environments: (await deps.directory.list()).map((e) => ({ environmentId: e.id, origin: e.origin, ownerAccountId: e.ownerAccountId })) },
      }),
    }),
    defineRoute({
      ...common,
      operationId: 'opsGrantPlatformAdmin',
      method: 'put',
      path: '/registry/accounts/{handle}/platform-admin',
      summary: 'Grant platform admin to an existing account',
      params: z.strictObject({ handle: z.string().regex(HANDLE) }),
      body: GrantAdminRequest,
      errors: [404],
      responses: { 200: { description: 'The account holds platform admin.', schema: GrantAdminResponse } },
      handler: async ({ params, body, headers }) => {
        const actor = operatorOf(headers);
        const { accountId } = await enrolledAccount(params.handle);
        const changed = await deps.admins.grant(accountId, actor, body.reason);
        return { status: 200, body: { accountId, handle: params.handle, changed } };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'opsListAccounts',
      method: 'get',
      path: '/registry/accounts',
      summary: 'Accounts, with their handle, epoch and device count, a page at a time',
      description:
        `Accounts that have been opened, in account id order, ${OPS_PAGE_DEFAULT} a page unless \`limit\` says otherwise ` +
        `(at most ${OPS_PAGE_MAX}): each is read as stored, without activating it, so a page bounds what one request reads. A full page ` +
        'carries `next`; pass it as `after` for the page after it.',
      query: z.strictObject({
        limit: opsPageLimit,
        after: z.string().min(1).max(200).optional().describe('The `next` of the previous page (the last account id it held).'),
      }),
      responses: { 200: { description: 'A page of accounts.', schema: AccountList } },
      handler: async ({ query }) => {
        let select = deps.db.selectFrom('actor_snapshots').select('key').where('kind', '=', 'account');
        if (query.after !== undefined) select = select.where('key', '>', query.after);
        const rows = await select.orderBy('key').limit(query.limit).execute();
        const admins = new Set(
          rows.length === 0
            ? []
            : (await deps.db.selectFrom('platform_admins').select('account_id').where('account_id', 'in', rows.map((r) => r.key)).execute()).map((r) => r.account_id),
        );
        // Read as stored, not through the actors: a listing walked page after page would otherwise activate every account.
        const read = await Promise.all(rows.map(async ({ key }) => ({ key, account: await deps.accounts.stored(key) })));
        // Retired between the page's read and its own (an abandoned account): no longer an account to list.
        const accounts = read.flatMap(({ key, account }) => account === undefined ? [] : [{
          accountId: key,
          handle: account.handle,
          epoch: account.epoch,
          activeDevices: Object.values(account.devices).filter((d) => d.status === 'active').length,
          platformAdmin: admins.has(key),
        }]);
        const last = rows.at(-1);
        return { status: 200, body: { accounts, ...(rows.length === query.limit && last ? { next: last.key } : {}) } };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'opsListDevices',
      method: 'get',
      path: '/registry/accounts/{handle}/devices',
      summary: "An account's devices, removed ones included",
      params: z.strictObject({ handle: z.string().regex(HANDLE) }),
      errors: [404],
      responses: { 200: { description: 'Devices.', schema: DeviceList } },
      handler: async ({ params }) => {
        const { accountId, account } = await enrolledAccount(params.handle);
        const devices = Object.values(account.devices).map((d) => ({
          deviceId: d.id,
          name: d.name,
          status: d.status,
          keyThumbprint: d.thumbprint,
          enrolledAt: new Date(d.enrolledAt).toISOString(),
          ...(d.removedAt !== undefined ? { removedAt: new Date(d.removedAt).toISOString() } : {}),
        }));
        return { status: 200, body: { accountId, handle: params.handle, devices } };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'opsListAudit',
      method: 'get',
      path: '/registry/audit',
      summary: 'Recent audit events, newest first',
      query: z.strictObject({ target: z.string().max(200).optional(), limit: z.coerce.number().int().min(1).max(500).default(50) }),
      responses: { 200: { description: 'Audit events.', schema: AuditList } },
      handler: async ({ query }) => {
        const events = await readAudit(deps.db, { limit: query.limit, ...(query.target ? { target: query.target } : {}) });
        return { status: 200, body: { events: events.map((e) => ({ ...e, at: e.at.toISOString(), data: { ...(e.data ?? {}) } })) } };
      },
    }),
  ];
}
