import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The operators' account listing reads what is stored and leaves memory as it found it: `registry-admin accounts list`
 * walks every page, and a page that activated its accounts kept each of them in memory for the passivation time, so
 * walking a large registry held most of its accounts in memory at once.
 */
const OPS_TOKEN = 'ops-token-for-the-listing-test';
let server: TestServer;
const suite = withTestServer(test, (started) => ({ server } = started), productParts, { OPS_TOKEN });

const ops = async (path: string): Promise<Record<string, unknown>> => {
  const res = await fetch(`${server.opsUrl}${path}`, { headers: { authorization: `Bearer ${OPS_TOKEN}` } });
  assert.is(res.status, 200, path);
  return (await res.json()) as Record<string, unknown>;
};
const liveAccounts = async (): Promise<number> => (await ops('/actors?kind=account')).total as number;

test('listing accounts activates none of them, and still answers their handle, epoch and devices', async () => {
  for (const handle of ['rosa', 'samir', 'tomas']) await enrolFirst(server.url, handle);
  // A fresh node: nothing of these accounts in memory.
  await suite.restart();
  assert.is(await liveAccounts(), 0);
  const page = (await ops('/registry/accounts')) as { accounts: Array<{ handle: string; epoch: number; activeDevices: number }> };
  assert.equal(page.accounts.map((a) => [a.handle, a.epoch > 0, a.activeDevices]).sort(), [['rosa', true, 1], ['samir', true, 1], ['tomas', true, 1]]);
  assert.is(await liveAccounts(), 0, 'the listing left accounts in memory');
});

test('an account in memory is listed as committed', async () => {
  const { accountId } = await enrolFirst(server.url, 'ulla');
  assert.ok(await liveAccounts() > 0);
  const page = (await ops('/registry/accounts')) as { accounts: Array<{ accountId: string; handle: string; activeDevices: number }> };
  const ulla = page.accounts.find((a) => a.accountId === accountId);
  assert.equal([ulla?.handle, ulla?.activeDevices], ['ulla', 1]);
});

test.run();
