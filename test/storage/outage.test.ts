import { errors as joseErrors } from 'jose';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { isStorageOutage } from '../../storage/outage.js';
import { createTestDatabase } from '../support/database.js';

/**
 * Which errors count as storage outages (503 storage_unavailable, retryable) rather than failures of the request or
 * bugs (500, logged as unhandled).
 */
const coded = (code: string, message = code) => Object.assign(new Error(message), { code });

test('errors coded ERR_* (Node, jose) are not storage outages; socket errors still are', () => {
  let nodeBug: unknown;
  try {
    Buffer.from(undefined as never);
  } catch (error) {
    nodeBug = error;
  }
  assert.is((nodeBug as { code?: string }).code, 'ERR_INVALID_ARG_TYPE');
  assert.is(isStorageOutage(nodeBug), false, 'TypeError [ERR_INVALID_ARG_TYPE]');
  assert.is(isStorageOutage(new joseErrors.JWSSignatureVerificationFailed()), false, 'jose ERR_JWS_SIGNATURE_VERIFICATION_FAILED');
  for (const code of ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']) {
    assert.is(isStorageOutage(coded(code)), true, code);
  }
});

test('Postgres connection, resource and shutdown classes are outages; errors about the statement are not', () => {
  for (const code of ['08006', '08001', '53300', '57P01', '57P03']) assert.is(isStorageOutage(coded(code)), true, code);
  for (const code of ['23505', '22P02', '42P01', '40001', '0800', '080060']) assert.is(isStorageOutage(coded(code)), false, code);
});

test('a statement cancelled by its timeout, and a backend that does not answer, are outages', async () => {
  const db = await createTestDatabase();
  const client = new pg.Client({ connectionString: db.url, statement_timeout: 50 });
  await client.connect();
  try {
    const cancelled = await client.query('SELECT pg_sleep(1)').then(() => undefined, (error: unknown) => error);
    assert.is((cancelled as { code?: string } | undefined)?.code, '57014');
    assert.is(isStorageOutage(cancelled), true, 'statement timeout');
  } finally {
    await client.end();
    await db.drop();
  }
  assert.is(isStorageOutage(new Error('Query read timeout')), true, "pg's client-side query timeout");
  assert.is(isStorageOutage(new Error('timeout expired')), true, "pg's connection timeout");
});

test.run();
