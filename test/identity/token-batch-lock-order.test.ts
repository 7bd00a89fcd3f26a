import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EXCHANGE_CODES, EXCHANGE_COLUMNS, ROTATE_REFRESH_TOKENS, ROTATION_COLUMNS } from '../../identity/oauth-grants.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The token endpoint's writes are group-committed, a batch per statement, two batches in flight. A client that sends
 * the same codes (or refresh tokens) twice can have them in two batches at once, in opposite orders: each statement
 * must lock its rows in one order (the key's), or the two lock them crosswise and Postgres ends one in a deadlock,
 * failing every request of that batch, other people's sign-ins included, with a 500. Two connections run the
 * statements exactly as the batchers do, one batch the reverse of the other.
 */
let db: TestDatabase;
let first: pg.Client;
let second: pg.Client;
const ROUNDS = 10;
const BATCH = 300;

test.before(async () => {
  db = await createTestDatabase();
  first = new pg.Client({ connectionString: db.url });
  second = new pg.Client({ connectionString: db.url });
  await Promise.all([first.connect(), second.connect()]);
  await first.query(`INSERT INTO oidc_clients (client_id, kind, name, redirect_uris) VALUES ('cli', 'cli', 'CLI', '[]'::jsonb)`);
});
test.after(async () => {
  await Promise.all([first.end(), second.end()]);
  await db.drop();
});

const keys = (): string[] => Array.from({ length: BATCH }, () => randomBytes(16).toString('base64url'));

/** Runs both batches at once; the rows each answered, and the errors. */
async function race(statement: string, batches: [unknown[], unknown[]]): Promise<{ answered: number; errors: string[] }> {
  const outcomes = await Promise.allSettled([first.query(statement, batches[0]), second.query(statement, batches[1])]);
  let answered = 0;
  const errors: string[] = [];
  for (const o of outcomes) {
    if (o.status === 'fulfilled') answered += o.value.rowCount ?? 0;
    else errors.push((o.reason as Error).message);
  }
  return { answered, errors };
}

test('two batches exchanging the same codes in opposite orders: no deadlock, each code exchanged once', async () => {
  for (let round = 0; round < ROUNDS; round++) {
    const codes = keys();
    const expires = new Date(Date.now() + 60_000).toISOString();
    await first.query(
      `INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, account_id, account_epoch, browser_id, expires_at)
       SELECT h, 'cli', 'http://127.0.0.1/cb', 'x', '[]'::jsonb, 'acc', 1, 'brw', $2::timestamptz FROM unnest($1::text[]) h`,
      [codes, expires],
    );
    const at = new Date().toISOString();
    const batch = (order: string[], tag: string): unknown[] => {
      const rows = order.map((code, i) => ({
        code_hash: code, grant_id: `grt_${tag}${round}_${i}`, kind: 'cli', client_id: 'cli', environment_id: null, redirect_uri: 'http://127.0.0.1/cb',
        code_challenge: 'x', refresh_hash: null, at, grant_expires_at: expires,
      }));
      return EXCHANGE_COLUMNS.map((key) => rows.map((row) => row[key]));
    };
    const { answered, errors } = await race(EXCHANGE_CODES, [batch(codes, 'a'), batch([...codes].reverse(), 'b')]);
    assert.equal(errors, [], `round ${round}`);
    assert.is(answered, BATCH, `round ${round}: every code exchanged exactly once`);
  }
});

test('two batches rotating the same refresh tokens in opposite orders: no deadlock, each token rotated once', async () => {
  for (let round = 0; round < ROUNDS; round++) {
    const tokens = keys();
    const grants = tokens.map((_, i) => `grt_r${round}_${i}`);
    const now = new Date().toISOString();
    const expires = new Date(Date.now() + 3_600_000).toISOString();
    await first.query(
      `INSERT INTO oauth_grants (id, kind, client_id, account_id, account_epoch, scopes, created_at, last_used_at, expires_at)
       SELECT g, 'cli', 'cli', 'acc', 1, '["openid","management"]'::jsonb, $2::timestamptz, $2::timestamptz, $3::timestamptz FROM unnest($1::text[]) g`,
      [grants, now, expires],
    );
    await first.query(
      `INSERT INTO oauth_refresh_tokens (token_hash, grant_id, generation, created_at) SELECT t, g, 1, $3::timestamptz FROM unnest($1::text[], $2::text[]) AS x(t, g)`,
      [tokens, grants, now],
    );
    const batch = (order: string[]): unknown[] => {
      const rows = order.map((token) => ({ token_hash: token, next_hash: randomBytes(16).toString('base64url'), client_id: 'cli', at: now }));
      return ROTATION_COLUMNS.map((key) => rows.map((row) => row[key]));
    };
    const { answered, errors } = await race(ROTATE_REFRESH_TOKENS, [batch(tokens), batch([...tokens].reverse())]);
    assert.equal(errors, [], `round ${round}`);
    assert.is(answered, BATCH, `round ${round}: every token rotated exactly once`);
  }
});

test.run();
