import { ControlClient } from './control-client.js';
import { MediaSession, parse, type Signal } from './media-session.js';
import type { MediaTestApi, ServerPush } from './page-api.js';
import { JoinedSchema, ScreenStartedSchema } from './signal-results.js';

/**
 * The entry of the media test page: one participant, its API on `window.mediaTest` (see page-api.ts for the
 * contract). test/support/media-page.ts bundles this file with esbuild and serves it.
 */
declare global {
  interface Window {
    mediaTest: MediaTestApi;
  }
}

type SignalMode = { readonly kind: 'none' } | { readonly kind: 'exposed'; readonly signal: Signal } | { readonly kind: 'control' };

const DEFAULT_PUSH_TIMEOUT_MS = 10_000;

let mode: SignalMode = { kind: 'none' };
const control = new ControlClient(onPush);
const media = new MediaSession((type, payload) => {
  switch (mode.kind) {
    case 'exposed':
      return mode.signal(type, payload);
    case 'control':
      return control.call(type, payload);
    case 'none':
      return Promise.reject(new Error('no signal yet: call useExposedSignal or connectControl first'));
  }
});

type ProducerView = Extract<ServerPush, { type: 'producer.added' }>['producer'];
/** Producers of others the server announced and has not removed, by id; `consumed` are those this page consumes. */
const announced = new Map<string, ProducerView>();
const consumed = new Set<string>();
const consumeErrors: string[] = [];
let consumingAll = false;

function onPush(push: ServerPush): void {
  if (push.type === 'producer.added') {
    if (push.producer.memberId === control.hello()?.memberId) return;
    announced.set(push.producer.producerId, push.producer);
    if (consumingAll) consumeAnnounced();
  } else if (push.type === 'producer.removed') {
    announced.delete(push.producerId);
    consumed.delete(push.producerId);
    media.producerRemoved(push.producerId);
  }
}

function consumeAnnounced(): void {
  for (const producerId of announced.keys()) {
    if (consumed.has(producerId)) continue;
    consumed.add(producerId);
    media.consume(producerId).catch((error: unknown) => {
      consumed.delete(producerId);
      consumeErrors.push(`${producerId}: ${error instanceof Error ? error.message : String(error)}`);
    });
  }
}

async function done(type: string, fields?: Readonly<Record<string, unknown>>): Promise<void> {
  await control.call(type, fields);
}

const api: MediaTestApi = {
  useExposedSignal(name) {
    const exposed: unknown = Reflect.get(window, name);
    if (typeof exposed !== 'function') throw new Error(`window.${name} is not a function: expose it before calling this`);
    const call = exposed as (type: string, payload: unknown) => unknown;
    mode = { kind: 'exposed', signal: async (type, payload) => call(type, payload) };
  },
  async connectControl(url, grant) {
    mode = { kind: 'control' };
    return control.connect(url, grant);
  },

  createDevice: (routerRtpCapabilities) => media.createDevice(routerRtpCapabilities),
  publishMicrophone: () => media.publishMicrophone(),
  publishScreen: (profile) => media.publishScreen(profile),
  consume: (producerId) => media.consume(producerId),
  async closeProducer(producerId) {
    if (mode.kind === 'control') await done('producer.close', { producerId });
    media.closeProducer(producerId);
  },
  consumerStats: () => media.consumerStats(),
  producerStats: () => media.producerStats(),
  resetMedia() {
    media.reset();
    consumed.clear();
  },

  async join() {
    const result = await control.call('room.join', { rtpCapabilities: await media.nativeRtpCapabilities() });
    // The room view came before this answer, as `room.state` pages: control.roomState() holds it.
    const { routerRtpCapabilities } = parse(JoinedSchema, result, 'room.join');
    if (!media.hasDevice()) await media.createDevice(routerRtpCapabilities);
    return result;
  },
  leave: () => done('room.leave'),
  consumeAll() {
    consumingAll = true;
    consumeAnnounced();
  },
  raiseHand: () => done('hand.raise'),
  lowerHand: () => done('hand.lower'),
  dismissHand: (target) => done('hand.dismiss', { target }),
  offer: (target) => done('speaker.offer', { target }),
  acceptOffer: () => done('speaker.accept'),
  declineOffer: () => done('speaker.decline'),
  revoke: (target) => done('speaker.revoke', { target }),
  takeFloor: () => done('floor.take'),
  releaseFloor: () => done('floor.release'),
  async startScreenShare() {
    const { screenProfile } = parse(ScreenStartedSchema, await control.call('screen.start'), 'screen.start');
    const { producerId } = await media.publishScreen(screenProfile);
    return { producerId, profile: screenProfile };
  },
  stopScreenShare: () => done('screen.stop'),
  refreshGrant: (grant) => done('grant.refresh', { grant }),
  ping: () => done('ping'),
  request: (type, fields) => control.request(type, fields),
  sendRaw: (text) => control.sendRaw(text),
  disconnect: () => control.disconnect(),
  reconnect: (grant) => control.reconnect(grant),

  hello: () => control.hello(),
  roomState: () => control.roomState(),
  pushes: () => control.pushes(),
  nextPush<T extends ServerPush['type']>(type: T, timeoutMs = DEFAULT_PUSH_TIMEOUT_MS) {
    return control.nextPush(type, timeoutMs) as Promise<Extract<ServerPush, { type: T }>>;
  },
  responses: () => control.responses(),
  protocolViolations: () => control.protocolViolations(),
  closed: () => control.closed(),
  consumeErrors: () => consumeErrors,
};

window.mediaTest = api;
