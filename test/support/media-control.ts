import WebSocket from 'ws';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { MEDIA_LIMITS, MediaV2ServerMessageSchema, RoomViewAssembler, type MediaV2ServerMessage, type RoomView } from '../../media/control/media-control.messages.js';
import { msgpackCodec } from '../../transport/ws/codecs.js';
import { LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from './runtime.js';
import { cutAfterUpgrade } from './uws-upgrade-cut.js';
import type { PublisherAuthorityRequest } from '../../media/publisher-authority/publisher-authority.messages.js';

/**
 * Server settings of the Media tests: one worker, and leases that outlast a slow run. A file opens its pages once and
 * never renews their leases; on a loaded machine a file took over the default 90 s, the leases lapsed mid-file and
 * every later grant was refused as standby.
 */
export const MEDIA_TEST_ENV: Readonly<Record<string, string>> = Object.freeze({ MEDIA_WORKERS: '1', ...LONG_LEASE_ENV });

/**
 * The setting of a server whose spaces call a publisher authority the test runs on 127.0.0.1: the callback reaches
 * loopback only when it is set (publisher-authority.destination.ts).
 */
export const LOOPBACK_AUTHORITY_ENV: Readonly<Record<string, string>> = Object.freeze({ MEDIA_CALLBACK_ALLOW_LOOPBACK: '1' });

/** Installs Media in an Environment and gives it a configuration, through the operator listener. */
export async function configureMedia(opsUrl: string, environmentId: string, configuration: unknown): Promise<void> {
  const headers = { 'x-operator-name': 'test-operator', 'content-type': 'application/json' };
  const installed = await fetch(`${opsUrl}/registry/environments/${environmentId}/plugins/plg_media`, { method: 'PUT', headers });
  if (installed.status !== 200) throw new Error(`install: ${installed.status} ${await installed.text()}`);
  const configured = await fetch(`${opsUrl}/registry/environments/${environmentId}/plugins/plg_media/configuration`, { method: 'PUT', headers, body: JSON.stringify(configuration) });
  if (configured.status !== 200) throw new Error(`configure: ${configured.status} ${await configured.text()}`);
}

/** A moderator (the Environment's owner) and a listener, each with an active page, in an Environment with Media configured. */
export interface MediaWorld {
  readonly world: TestEnvironment;
  readonly mod: RuntimePerson;
  readonly lia: RuntimePerson;
  readonly modPage: RuntimeClient;
  readonly liaPage: RuntimeClient;
}

export async function mediaWorld(server: { url: string; opsUrl: string }, environmentId: string, configuration: unknown): Promise<MediaWorld> {
  const mod = await runtimePerson(server, 'moderator-mo');
  const lia = await runtimePerson(server, 'listener-lia');
  const world = await testEnvironment(server.opsUrl, environmentId, 'moderator-mo');
  await configureMedia(server.opsUrl, world.environmentId, configuration);
  const modPage = await (await mod.runtime(world)).open();
  const liaPage = await (await lia.runtime(world)).open();
  return { world, mod, lia, modPage, liaPage };
}

/** A space as large as the contract allows (150 participants, so a stage), moderated, hands raised by request. */
export const FULL_STAGE = Object.freeze({
  mode: 'stage',
  maxParticipants: 150,
  maxSpeakerSeats: 2,
  floorControl: 'moderated',
  raiseHand: 'enabled',
  screenShare: 'speakers',
  guestPolicy: 'account_required',
  encryption: 'transport',
  reconnectGraceSeconds: 30,
});

/**
 * A meeting policy at the contract's structural maximum (150 participants, maxParticipantsPerContext), open floor. The
 * registry stores it; the Media service's cross-field check refuses to open a room with it (`meeting_too_large`: a
 * meeting holds at most 16), so it serves tests that only connect, where the context's member count is what matters.
 */
export const FULL_MEETING = Object.freeze({
  mode: 'meeting',
  maxParticipants: 150,
  maxSpeakerSeats: 16,
  floorControl: 'open',
  raiseHand: 'disabled',
  screenShare: 'speakers',
  screenProfile: 'slides',
  guestPolicy: 'account_required',
  encryption: 'transport',
  reconnectGraceSeconds: 30,
});

/** A publisher-authority callback's request as the Media plugin sends it, for the callback client's tests. */
export const PUBLISHER_AUTHORITY_REQUEST: PublisherAuthorityRequest = Object.freeze({
  grant: 'ebg_forwarded-grant-token-0123456789',
  environmentId: 'stage-world',
  scope: 'room:lobby',
  spaceId: 'town_hall',
  actorId: 'act_0123456789abcdefghjkmnpqrs',
  source: 'microphone',
  requestId: 'req-0001-abcdef',
});

export const ALL_MEDIA_SCOPES = ['media:connect', 'media:direct-call', 'media:join-space', 'media:request-speak', 'media:publish'];

/** A Media control grant for the page's active Runtime. */
export async function mediaGrant(page: RuntimeClient, scope: string, scopes: readonly string[] = ALL_MEDIA_SCOPES): Promise<string> {
  const res = await page.pluginGrant('plg_media', { component: 'control', scopes, context: { scope } });
  if (res.status !== 201) throw new Error(`grant: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { grant: string }).grant;
}

type Response = Extract<MediaV2ServerMessage, { type: 'response' }>;

export type MediaCodecName = 'json' | 'msgpack';

/**
 * A control-plane connection as a Node client: requests matched to responses, pushes kept in arrival order. Like a
 * careful client, it refuses frames over the contract's maxMessageBytes (ws `maxPayload`: such a frame closes the
 * socket with 1009), and it records the size of every frame it received.
 */
export class MediaControlClient {
  readonly pushes: MediaV2ServerMessage[] = [];
  /** Room views, in the order they were complete (from `room.state` and its pages). */
  readonly views: RoomView[] = [];
  readonly #assembler = new RoomViewAssembler();
  /** Payload bytes of every frame received, in order. */
  readonly frameBytes: number[] = [];
  closeCode: number | undefined;
  readonly codec: MediaCodecName;
  readonly #ws: WebSocket;
  readonly #waiting = new Map<string, { resolve: (r: Response) => void; reject: (error: Error) => void }>();
  #next = 0;
  readonly closed: Promise<number>;

  private constructor(ws: WebSocket, codec: MediaCodecName) {
    this.#ws = ws;
    this.codec = codec;
    this.closed = new Promise((resolve) =>
      ws.on('close', (code) => {
        // Every response that came was delivered before the close: what is still waiting will never be answered.
        for (const [, waiting] of this.#waiting) waiting.reject(new Error(`closed ${code} before a response`));
        resolve((this.closeCode = code));
      }),
    );
    ws.on('message', (data, isBinary) => {
      const bytes = data as Buffer;
      this.frameBytes.push(bytes.byteLength);
      if (isBinary !== (codec === 'msgpack')) throw new Error(`a ${isBinary ? 'binary' : 'text'} frame on ${codec}`);
      const decoded: unknown = codec === 'msgpack' ? msgpackCodec.decode(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer) : JSON.parse(String(bytes));
      const message = MediaV2ServerMessageSchema.parse(decoded);
      if (message.type === 'response') this.#waiting.get(message.id)?.resolve(message);
      else {
        this.pushes.push(message);
        const view = this.#assembler.accept(message);
        if (view) this.views.push(view);
      }
    });
  }

  /**
   * Opens a connection; resolves once `hello` arrived, rejects with the upgrade's status on refusal. A connection uWS
   * cut right after its upgrade is opened again (see cutAfterUpgrade).
   */
  static async connect(baseUrl: string, grant: string | undefined, origin: string, codec: MediaCodecName = 'json'): Promise<MediaControlClient> {
    for (let attempt = 1; ; attempt += 1) {
      const client = await MediaControlClient.#open(baseUrl, grant, origin, codec);
      if (attempt === 3 || !(await cutAfterUpgrade(client.#ws, client.closed))) return client;
    }
  }

  static #open(baseUrl: string, grant: string | undefined, origin: string, codec: MediaCodecName): Promise<MediaControlClient> {
    const url = `${baseUrl.replace(/^http/, 'ws')}/v1/plugins/media/control`;
    const subprotocol = codec === 'msgpack' ? msgpackCodec.subprotocol : 'registry.v1.json';
    const ws = new WebSocket(url, grant === undefined ? [subprotocol] : [subprotocol, `registry.bearer.${grant}`], { headers: { origin }, maxPayload: MEDIA_LIMITS.maxMessageBytes });
    const client = new MediaControlClient(ws, codec);
    return new Promise((resolve, reject) => {
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => reject(Object.assign(new Error(`upgrade refused ${res.statusCode}`), { status: res.statusCode, body })));
      });
      ws.on('error', reject);
      const started = Date.now();
      const poll = setInterval(() => {
        if (client.pushes.some((p) => p.type === 'hello')) {
          clearInterval(poll);
          resolve(client);
        } else if (Date.now() - started > 10_000) {
          clearInterval(poll);
          reject(new Error('no hello'));
        }
      }, 5);
    });
  }

  request(type: string, fields: Record<string, unknown> = {}): Promise<Response> {
    const id = `r${++this.#next}`;
    if (this.closeCode !== undefined) return Promise.reject(new Error(`closed ${this.closeCode}: ${type} not sent`));
    return new Promise((resolve, reject) => {
      const settle = (): void => {
        clearTimeout(timer);
        this.#waiting.delete(id);
      };
      const timer = setTimeout(() => {
        settle();
        reject(new Error(`no response to ${type}`));
      }, 10_000);
      this.#waiting.set(id, {
        resolve: (r) => {
          settle();
          resolve(r);
        },
        reject: (error) => {
          settle();
          reject(error);
        },
      });
      this.#ws.send(this.codec === 'msgpack' ? msgpackCodec.encode({ type, id, ...fields }) : JSON.stringify({ type, id, ...fields }));
    });
  }

  /** The newest room view this connection holds (highest revision), if any. */
  room(): RoomView | undefined {
    return this.views.at(-1);
  }

  /** The newest room view satisfying `accept`, waiting for it. */
  async view(accept: (room: RoomView) => boolean = () => true, timeoutMs = 10_000): Promise<RoomView> {
    const started = Date.now();
    for (;;) {
      const found = [...this.views].reverse().find(accept);
      if (found) return found;
      if (Date.now() - started > timeoutMs) throw new Error('no such room view');
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Sends raw text (for limit tests). */
  sendRaw(text: string): void {
    this.#ws.send(text);
  }

  /** The newest push of a type satisfying `accept`, waiting for it. */
  async push<T extends MediaV2ServerMessage['type']>(type: T, accept: (m: Extract<MediaV2ServerMessage, { type: T }>) => boolean = () => true, timeoutMs = 10_000): Promise<Extract<MediaV2ServerMessage, { type: T }>> {
    const started = Date.now();
    for (;;) {
      const found = [...this.pushes].reverse().find((m): m is Extract<MediaV2ServerMessage, { type: T }> => m.type === type && accept(m as Extract<MediaV2ServerMessage, { type: T }>));
      if (found) return found;
      if (Date.now() - started > timeoutMs) throw new Error(`no ${type} push`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  close(): void {
    this.#ws.close();
  }

  /** Drops the TCP connection without a close frame, as a lost network would. */
  terminate(): void {
    this.#ws.terminate();
  }
}
