import type { MediaV2ServerMessage, RoomView } from '../../../media/control/media-control.messages.js';

/**
 * What the media test page (test/media/browser/page.ts, bundled by test/support/media-page.ts) puts on
 * `window.mediaTest`, and so what a Node test calls through Playwright's `page.evaluate`. Types only: both the page
 * (DOM) and the Node tests (no DOM) compile this file. Everything crossing the boundary is plain data.
 *
 * One page is one participant. Its media layer (mediasoup-client) reaches the SFU through one signal function, chosen
 * once per page: the control socket (`connectControl`) or a function the test exposed (`useExposedSignal`).
 */

/** A mediasoup parameter object (RTP capabilities, ICE, DTLS or RTP parameters) carried as the server gave it. */
export type MediaParameters = Readonly<Record<string, unknown>>;

/** The requests the media layer sends through its signal: the media requests of the control protocol, same fields. */
export type MediaSignalType = 'transport.create' | 'transport.connect' | 'produce' | 'consume' | 'consumer.resume';

/** How the screen is encoded: `slides` favours sharpness at a low frame rate, `motion` a fluid picture. */
export type ScreenProfile = 'slides' | 'motion';

/** What the page received on one consumer, from its `inbound-rtp` stats (zero until the first packet). */
export interface ConsumerMeasurement {
  readonly consumerId: string;
  readonly producerId: string;
  readonly kind: 'audio' | 'video';
  readonly packetsReceived: number;
  readonly packetsLost: number;
  readonly bytesReceived: number;
  /** Audio only: grows while decoded sound that is not silence plays out (the page plays every audio consumer). */
  readonly totalAudioEnergy: number;
  readonly audioLevel: number;
  /** Video only. */
  readonly framesDecoded: number;
  readonly frameWidth: number;
  readonly frameHeight: number;
}

/** What the page sent on one producer, from its `outbound-rtp` stats. */
export interface ProducerMeasurement {
  readonly producerId: string;
  readonly kind: 'audio' | 'video';
  readonly source: 'microphone' | 'screen';
  readonly packetsSent: number;
  readonly bytesSent: number;
  readonly framesEncoded: number;
}

/** One answered control request, in arrival order, refusals included. */
export type ControlResponseRecord =
  | { readonly id: string; readonly type: string; readonly ok: true; readonly result: Readonly<Record<string, unknown>> }
  | { readonly id: string; readonly type: string; readonly ok: false; readonly error: { readonly code: string; readonly message: string; readonly requestId: string } };

/** How the control socket closed (the browser's CloseEvent). */
export interface ControlCloseRecord {
  readonly code: number;
  readonly reason: string;
  readonly wasClean: boolean;
}

export type HelloMessage = Extract<MediaV2ServerMessage, { type: 'hello' }>;
/** Every server message that is not the answer to a request. */
export type ServerPush = Exclude<MediaV2ServerMessage, { type: 'response' }>;

/**
 * The page's API. Methods that talk to the server reject with an Error whose message starts `refused <type>
 * <code>:` when the server answers `ok: false` (the full answer stays in `responses()`), and with a plain Error for
 * anything else (no answer in time, socket closed, invalid answer).
 */
export interface MediaTestApi {
  // ---- signalling choice -----------------------------------------------------------------------------------------
  /**
   * Media requests go to `window[name](type, payload)`, a function the test exposed with `page.exposeFunction`,
   * resolving to the request's result. For tests of the media layer without the control plane.
   */
  useExposedSignal(name: string): void;
  /**
   * Opens the control socket with the grant as subprotocol `registry.bearer.<grant>` and resolves with `hello`
   * (rejects if the socket closes first). Media requests then go over it.
   */
  connectControl(url: string, grant: string): Promise<HelloMessage>;

  // ---- media (either signal) -------------------------------------------------------------------------------------
  /** Loads the mediasoup-client Device with the router's capabilities; resolves with the device's own. */
  createDevice(routerRtpCapabilities: MediaParameters): Promise<MediaParameters>;
  /** Fake microphone → `transport.create` send (once) → `transport.connect` (once) → `produce` source microphone. */
  publishMicrophone(): Promise<{ readonly producerId: string }>;
  /** Fake screen (getDisplayMedia) as VP8 with the profile's encodings → `produce` source screen. */
  publishScreen(profile: ScreenProfile): Promise<{ readonly producerId: string }>;
  /** `consume` on the recv transport (created once), plays the track, then `consumer.resume`. */
  consume(producerId: string): Promise<{ readonly consumerId: string; readonly kind: 'audio' | 'video' }>;
  /** `producer.close` needs the control socket; with an exposed signal this only stops the local producer. */
  closeProducer(producerId: string): Promise<void>;
  consumerStats(): Promise<readonly ConsumerMeasurement[]>;
  producerStats(): Promise<readonly ProducerMeasurement[]>;
  /** Drops every local transport, producer and consumer (after `media.reset`, or a reconnect that lost them). */
  resetMedia(): void;

  // ---- control plane ---------------------------------------------------------------------------------------------
  /** `room.join` with this browser's RTP capabilities, then loads the Device with the router's from the answer. */
  join(): Promise<Readonly<Record<string, unknown>>>;
  leave(): Promise<void>;
  /** Consumes every producer of others known now and every later `producer.added`; failures land in `consumeErrors()`. */
  consumeAll(): void;
  raiseHand(): Promise<void>;
  lowerHand(): Promise<void>;
  dismissHand(target: string): Promise<void>;
  offer(target: string): Promise<void>;
  acceptOffer(): Promise<void>;
  declineOffer(): Promise<void>;
  revoke(target: string): Promise<void>;
  takeFloor(): Promise<void>;
  releaseFloor(): Promise<void>;
  /** `screen.start`, then publishes the screen with the profile the answer names. */
  startScreenShare(): Promise<{ readonly producerId: string; readonly profile: ScreenProfile }>;
  stopScreenShare(): Promise<void>;
  refreshGrant(grant: string): Promise<void>;
  ping(): Promise<void>;
  /** Any request, answered with its raw response record (never rejects on a refusal). */
  request(type: string, fields?: Readonly<Record<string, unknown>>): Promise<ControlResponseRecord>;
  /** Sends a text frame as is (malformed or oversized messages). */
  sendRaw(text: string): void;
  /** Closes the socket abruptly, as a lost network would (no `room.leave`). */
  disconnect(): void;
  /** A new socket with this grant; media objects are kept (call `resetMedia()` if the server dropped them). */
  reconnect(grant: string): Promise<HelloMessage>;

  // ---- what the page saw -----------------------------------------------------------------------------------------
  hello(): HelloMessage | null;
  /** The newest whole room view, put together from `room.state` and its `room.state.members` pages. */
  roomState(): RoomView | null;
  /** Every push received, oldest first (not drained). */
  pushes(): readonly ServerPush[];
  /** The first push of this type not yet taken by `nextPush`, waiting up to `timeoutMs` for one. */
  nextPush<T extends ServerPush['type']>(type: T, timeoutMs?: number): Promise<Extract<ServerPush, { type: T }>>;
  responses(): readonly ControlResponseRecord[];
  /** Frames that did not parse against `MediaV2ServerMessageSchema` (a correct server leaves this empty). */
  protocolViolations(): readonly string[];
  closed(): ControlCloseRecord | null;
  consumeErrors(): readonly string[];
}
