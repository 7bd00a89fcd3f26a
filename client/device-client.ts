import { createHash, randomBytes } from 'node:crypto';
import { CompactSign, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';

/**
 * A device as the registry sees it: a P-256 key pair, and once enrolled its device id. Signs device assertions
 * (see `identity/device-assertion.ts` for the format) and sends requests with them. Used by tests, benchmarks and the
 * command-line tool.
 */
export class DeviceClient {
  readonly name: string;
  readonly publicJwk: JWK;
  readonly #privateKey: CryptoKey;
  deviceId: string | undefined;
  /** The device's clock (ms): tests that drive the server's clock by hand point it there. */
  now: () => number = Date.now;

  private constructor(name: string, publicJwk: JWK, privateKey: CryptoKey) {
    this.name = name;
    this.publicJwk = publicJwk;
    this.#privateKey = privateKey;
  }

  static async generate(name: string): Promise<DeviceClient> {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const jwk = await exportJWK(publicKey);
    return new DeviceClient(name, { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, privateKey);
  }

  /** The assertion for one request. `target` is the path with its query string, exactly as sent. */
  async assertion(input: {
    method: string;
    target: string;
    body?: Uint8Array | string;
    bindBody?: boolean;
    issuedAt?: number;
    jti?: string;
    deviceId?: string;
    /** Signs exactly this text instead of the claims above: for tests of what the server does with hostile payloads. */
    rawPayload?: string;
    /**
     * Members added to the protected header, signed as given (through WebCrypto: jose refuses to make a header it would
     * not accept): for tests of what the server does with hostile headers.
     */
    extraHeader?: Record<string, unknown>;
  }): Promise<string> {
    const kid = input.deviceId ?? this.deviceId;
    if (!kid) throw new Error('the device has no id yet: start an enrolment first');
    const payload: Record<string, unknown> = {
      htm: input.method.toUpperCase(),
      htu: input.target,
      iat: input.issuedAt ?? Math.floor(this.now() / 1000),
      jti: input.jti ?? randomBytes(18).toString('base64url'),
    };
    if (input.bindBody) payload.bdh = createHash('sha256').update(input.body ?? '').digest('base64url');
    const payloadText = input.rawPayload ?? JSON.stringify(payload);
    if (input.extraHeader) {
      const header = Buffer.from(JSON.stringify({ alg: 'ES256', typ: 'device-assertion+jwt', kid, ...input.extraHeader })).toString('base64url');
      const signingInput = `${header}.${Buffer.from(payloadText).toString('base64url')}`;
      // WebCrypto's ECDSA signature is r ‖ s, as JWS wants it.
      const signature = await crypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, this.#privateKey, Buffer.from(signingInput));
      return `${signingInput}.${Buffer.from(signature).toString('base64url')}`;
    }
    return new CompactSign(new TextEncoder().encode(payloadText))
      .setProtectedHeader({ alg: 'ES256', typ: 'device-assertion+jwt', kid })
      .sign(this.#privateKey);
  }

  /** Sends a JSON request signed by this device (the body bound to the assertion unless `bindBody: false`). */
  async request(
    baseUrl: string,
    method: string,
    target: string,
    body?: unknown,
    options: { bindBody?: boolean; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    const text = body === undefined ? undefined : JSON.stringify(body);
    // The assertion names the target as it travels: fetch percent-encodes and normalises what it is given, and any
    // path of `baseUrl` is part of what the server receives.
    const url = new URL(baseUrl + target);
    const sent = url.href.slice(url.origin.length, url.hash ? -url.hash.length : undefined);
    const assertion = await this.assertion({ method, target: sent, ...(text !== undefined ? { body: text } : {}), bindBody: options.bindBody ?? text !== undefined });
    return fetch(url, {
      method,
      headers: { ...options.headers, 'platform-device-assertion': assertion, ...(text !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(text !== undefined ? { body: text } : {}),
    });
  }
}
