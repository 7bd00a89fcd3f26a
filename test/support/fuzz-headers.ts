import type { DeviceClient } from '../../client/device-client.js';

/** One header oddity: the headers it sends (replacing any of the same names the credentials would have sent). */
export interface HeaderCase {
  readonly name: string;
  headers(request: { readonly method: string; readonly target: string; readonly device: DeviceClient }): Promise<Array<[string, string]>>;
}

const fixed = (name: string, ...headers: Array<[string, string]>): HeaderCase => ({ name, headers: async () => headers });

const b64 = (text: string): string => Buffer.from(text).toString('base64url');
const unsignedJws = (header: unknown, payload: unknown): string => `${b64(JSON.stringify(header))}.${b64(JSON.stringify(payload))}.${b64('sig')}`;
/** Latin1 text as sent: bytes over 0x7f, which a header value may carry (obs-text) but no token allows. */
const obsText = 'caf\u00e9\u00ff';

const signed = (name: string, claims: (request: { method: string; target: string }) => { rawPayload?: string; issuedAt?: number; jti?: string; method?: string; target?: string; deviceId?: string; extraHeader?: Record<string, unknown> }): HeaderCase => ({
  name,
  headers: async ({ method, target, device }) => {
    const c = claims({ method, target });
    const assertion = await device.assertion({
      method: c.method ?? method,
      target: c.target ?? target,
      ...(c.rawPayload === undefined ? {} : { rawPayload: c.rawPayload }),
      ...(c.issuedAt === undefined ? {} : { issuedAt: c.issuedAt }),
      ...(c.jti === undefined ? {} : { jti: c.jti }),
      ...(c.deviceId === undefined ? {} : { deviceId: c.deviceId }),
      ...(c.extraHeader === undefined ? {} : { extraHeader: c.extraHeader }),
    });
    return [['Platform-Device-Assertion', assertion]];
  },
});

const now = (): number => Math.floor(Date.now() / 1000);

/** Header oddities: credentials of every scheme malformed, preconditions and idempotency keys malformed, repeats. */
export const HEADER_CASES: readonly HeaderCase[] = [
  fixed('Idempotency-Key empty', ['Idempotency-Key', '']),
  fixed('Idempotency-Key huge', ['Idempotency-Key', 'k'.repeat(8000)]),
  fixed('Idempotency-Key obs-text', ['Idempotency-Key', obsText]),
  fixed('Idempotency-Key repeated', ['Idempotency-Key', 'a'], ['Idempotency-Key', 'b']),
  fixed('Idempotency-Key list', ['Idempotency-Key', 'a, b']),
  fixed('If-Match empty', ['If-Match', '']),
  fixed('If-Match unquoted', ['If-Match', 'abc']),
  fixed('If-Match unterminated', ['If-Match', '"abc']),
  fixed('If-Match weak', ['If-Match', 'W/"abc"']),
  fixed('If-Match star and tag', ['If-Match', '*, "abc"']),
  fixed('If-Match commas only', ['If-Match', ',,,']),
  fixed('If-Match repeated', ['If-Match', '"a"'], ['If-Match', '"b"']),
  fixed('If-Match huge list', ['If-Match', Array.from({ length: 2000 }, (_, i) => `"${i}"`).join(', ')]),
  fixed('If-Match obs-text', ['If-Match', `"${obsText}"`]),
  fixed('If-None-Match odd', ['If-None-Match', 'W/"x", *, "y"']),
  fixed('If-None-Match huge', ['If-None-Match', `"${'e'.repeat(7000)}"`]),
  fixed('Cookie empty', ['Cookie', '']),
  fixed('Cookie separators only', ['Cookie', ';;; ;=;==']),
  fixed('console cookie empty', ['Cookie', '__Host-registry_console=']),
  fixed('console cookie repeated', ['Cookie', '__Host-registry_console=a; __Host-registry_console=b']),
  fixed('page cookie garbage', ['Cookie', '__Host-registry_page=%00%ED%A0%80; __Host-registry_console="quoted"']),
  fixed('page cookie huge', ['Cookie', `__Host-registry_page=${'p'.repeat(7000)}`]),
  fixed('cookie obs-text', ['Cookie', `__Host-registry_page=${obsText}`]),
  fixed('two Cookie headers', ['Cookie', '__Host-registry_page=a'], ['Cookie', '__Host-registry_console=b']),
  fixed('CSRF token odd', ['Cookie', '__Host-registry_console=a'], ['X-CSRF-Token', obsText]),
  fixed('Authorization scheme only', ['Authorization', 'Bearer']),
  fixed('Authorization empty bearer', ['Authorization', 'Bearer ']),
  fixed('Authorization lower-case garbage', ['Authorization', 'bearer x']),
  fixed('Authorization Basic', ['Authorization', 'Basic dXNlcjpwYXNz']),
  fixed('Authorization Basic garbage', ['Authorization', 'Basic !!!']),
  fixed('Authorization Basic no colon', ['Authorization', `Basic ${Buffer.from('nocolon').toString('base64')}`]),
  fixed('Authorization two tokens', ['Authorization', 'Bearer a b']),
  fixed('Authorization unknown scheme', ['Authorization', 'DPoP abc']),
  fixed('Authorization huge', ['Authorization', `Bearer ${'t'.repeat(7000)}`]),
  fixed('Authorization obs-text', ['Authorization', `Bearer ${obsText}`]),
  fixed('Authorization repeated', ['Authorization', 'Bearer a'], ['Authorization', 'Bearer b']),
  fixed('Authorization JWT of garbage', ['Authorization', 'Bearer eyJ.eyJ.sig']),
  fixed('Authorization JWT alg none', ['Authorization', `Bearer ${b64('{"alg":"none"}')}.${b64('{"sub":"x","aud":"registry-runtime"}')}.`]),
  fixed('Authorization JWT JSON null parts', ['Authorization', `Bearer ${b64('null')}.${b64('null')}.${b64('x')}`]),
  fixed('Authorization JWT lone surrogate', ['Authorization', `Bearer ${b64('{"alg":"ES256","kid":"\\ud800"}')}.${b64('{"sub":"\\u0000"}')}.x`]),
  fixed('Authorization JWT huge numbers', ['Authorization', `Bearer ${b64('{"alg":"ES256"}')}.${b64('{"exp":1e309,"iat":-0,"nbf":9007199254740993}')}.x`]),
  fixed('device assertion empty', ['Platform-Device-Assertion', '']),
  fixed('device assertion two parts', ['Platform-Device-Assertion', 'a.b']),
  fixed('device assertion dots', ['Platform-Device-Assertion', '....']),
  fixed('device assertion not base64', ['Platform-Device-Assertion', '!!.??.**']),
  fixed('device assertion null header', ['Platform-Device-Assertion', unsignedJws(null, {})]),
  fixed('device assertion array header', ['Platform-Device-Assertion', unsignedJws([1], {})]),
  fixed('device assertion unknown kid', ['Platform-Device-Assertion', unsignedJws({ alg: 'ES256', typ: 'device-assertion+jwt', kid: 'dev_nobody' }, { htm: 'GET', htu: '/', iat: now(), jti: 'j' })]),
  fixed('device assertion kid __proto__', ['Platform-Device-Assertion', unsignedJws({ alg: 'ES256', typ: 'device-assertion+jwt', kid: '__proto__' }, {})]),
  fixed('device assertion kid NUL', ['Platform-Device-Assertion', `${b64('{"alg":"ES256","typ":"device-assertion+jwt","kid":"a\\u0000\\ud800"}')}.${b64('{}')}.x`]),
  fixed('device assertion huge kid', ['Platform-Device-Assertion', unsignedJws({ alg: 'ES256', typ: 'device-assertion+jwt', kid: 'k'.repeat(5000) }, {})]),
  fixed('device assertion huge', ['Platform-Device-Assertion', 'a'.repeat(7000)]),
  fixed('device assertion repeated', ['Platform-Device-Assertion', 'a.b.c'], ['Platform-Device-Assertion', 'd.e.f']),
  fixed('review capability garbage', ['Platform-Review-Capability', `${obsText}..`]),
  signed('device assertion for another method', ({ method }) => ({ method: method === 'GET' ? 'POST' : 'GET' })),
  signed('device assertion for another target', ({ target }) => ({ target: `${target}/x` })),
  signed('device assertion from the far past', () => ({ issuedAt: 1 })),
  signed('device assertion from the future', () => ({ issuedAt: now() + 86_400 })),
  signed('device assertion iat 1e309', ({ method, target }) => ({ rawPayload: `{"htm":"${method}","htu":${JSON.stringify(target)},"iat":1e309,"jti":"j1"}` })),
  signed('device assertion iat -0 and 2^53+1 jti', ({ method, target }) => ({ rawPayload: `{"htm":"${method}","htu":${JSON.stringify(target)},"iat":-0,"jti":9007199254740993}` })),
  signed('device assertion iat as text', ({ method, target }) => ({ rawPayload: JSON.stringify({ htm: method, htu: target, iat: String(now()), jti: 'j2' }) })),
  signed('device assertion payload null', () => ({ rawPayload: 'null' })),
  signed('device assertion payload array', () => ({ rawPayload: '[1,2]' })),
  signed('device assertion payload not JSON', () => ({ rawPayload: '{"htm":' })),
  signed('device assertion payload duplicate keys', ({ method, target }) => ({ rawPayload: `{"htm":"${method}","htu":${JSON.stringify(target)},"iat":${now()},"jti":"a","jti":"b"}` })),
  signed('device assertion payload lone surrogate jti', ({ method, target }) => ({ rawPayload: `{"htm":"${method}","htu":${JSON.stringify(target)},"iat":${now()},"jti":"\\ud800\\u0000"}` })),
  signed('device assertion huge jti', ({ method, target }) => ({ rawPayload: JSON.stringify({ htm: method, htu: target, iat: now(), jti: 'j'.repeat(3000) }) })),
  signed('device assertion bdh wrong type', ({ method, target }) => ({ rawPayload: JSON.stringify({ htm: method, htu: target, iat: now(), jti: 'j3', bdh: { a: 1 } }) })),
  signed('device assertion __proto__ claims', ({ method, target }) => ({ rawPayload: `{"htm":"${method}","htu":${JSON.stringify(target)},"iat":${now()},"jti":"j4","__proto__":{"admin":true}}` })),
  signed('device assertion crit header', () => ({ extraHeader: { crit: ['exp'] } })),
  signed('device assertion jwk header', () => ({ extraHeader: { jwk: { kty: 'EC' }, b64: false } })),
  signed('device assertion foreign kid', () => ({ deviceId: 'dev_\u0000' })),
  fixed('Origin null', ['Origin', 'null']),
  fixed('Origin empty', ['Origin', '']),
  fixed('Origin odd', ['Origin', 'https://a.example:99999']),
  fixed('Origin obs-text', ['Origin', `https://${obsText}.example`]),
  fixed('Origin repeated', ['Origin', 'https://a.example'], ['Origin', 'https://b.example']),
  fixed('Origin huge', ['Origin', `https://${'o'.repeat(6000)}.example`]),
  fixed('runtime session garbage', ['X-Platform-Runtime-Session', `rts_${obsText}`]),
  fixed('runtime session huge', ['X-Platform-Runtime-Session', `rts_${'s'.repeat(6000)}`]),
  fixed('lease version 1e309', ['X-Platform-Runtime-Lease-Version', '1e309']),
  fixed('lease version -0', ['X-Platform-Runtime-Lease-Version', '-0']),
  fixed('lease version 2^53+1', ['X-Platform-Runtime-Lease-Version', '9007199254740993']),
  fixed('lease version at its pattern maximum', ['X-Platform-Runtime-Lease-Version', '9999999999999999']),
  fixed('lease version empty', ['X-Platform-Runtime-Lease-Version', '']),
  fixed('lease version hex', ['X-Platform-Runtime-Lease-Version', '0x10']),
  fixed('lease version repeated', ['X-Platform-Runtime-Lease-Version', '1'], ['X-Platform-Runtime-Lease-Version', '2']),
  fixed('lease garbage', ['X-Platform-Runtime-Lease', '%00'], ['X-Platform-Runtime-Lease-Version', 'NaN']),
  fixed('client request id', ['X-Request-Id', `\u00ff${'r'.repeat(5000)}`]),
  fixed('forwarded garbage', ['X-Forwarded-For', 'not-an-address, ::ffff:999.1.1.1'], ['Forwarded', 'for="[::1"']),
  fixed('Accept odd', ['Accept', 'application/problem+json;q=abc, */*;q=1e309']),
  fixed('Content-Type without body', ['Content-Type', 'application/json']),
  fixed('Access-Control-Request odd', ['Access-Control-Request-Method', 'FOO'], ['Access-Control-Request-Headers', obsText]),
];
