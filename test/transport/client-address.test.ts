import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { clientBucket } from '../../transport/http/client-address.js';

/**
 * Per-address limits count an IPv4 address or an IPv6 /64 as one client: a subscriber routinely holds a whole /64,
 * and counted address by address it had 2^64 buckets (every per-address limit unlimited, and other clients' buckets
 * pushed out of the limiter's bounded table by a stream of fresh addresses).
 */
test('IPv4 addresses are their own buckets', () => {
  assert.is(clientBucket('203.0.113.7'), '203.0.113.7');
  assert.is.not(clientBucket('203.0.113.7'), clientBucket('203.0.113.8'));
});

test('every address of one IPv6 /64 shares a bucket, however it is written; another /64 has its own', () => {
  const bucket = clientBucket('2001:db8:1:2::1');
  assert.is(bucket, '2001:db8:1:2::/64');
  for (const same of ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0DB8:0001:0002:0000:0000:0000:0abc', '2001:db8:1:2::1.2.3.4', '2001:db8:1:2::9%eth0']) {
    assert.is(clientBucket(same), bucket, same);
  }
  assert.is(clientBucket('2001:db8:1:3::1'), '2001:db8:1:3::/64');
  assert.is(clientBucket('::1'), '0:0:0:0::/64');
  assert.is(clientBucket('fe80::1'), 'fe80:0:0:0::/64');
});

test('an IPv4-mapped IPv6 address (a dual-stack socket) is that IPv4 address, written either way', () => {
  assert.is(clientBucket('::ffff:203.0.113.7'), '203.0.113.7');
  assert.is(clientBucket('0000:0000:0000:0000:0000:ffff:cb00:7107'), '203.0.113.7');
});

test('text that is no address is its own bucket', () => {
  assert.is(clientBucket(''), '');
  assert.is(clientBucket('unix:/tmp/socket'), 'unix:/tmp/socket');
});

test.run();
