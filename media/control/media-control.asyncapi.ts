import { asyncApiMessages } from '../../transport/ws/asyncapi-messages.js';
import { MEDIA_LIMITS, MediaCloseCode, MediaV2ClientMessageSchema, MediaV2ServerMessageSchema, TRANSPORTS_PER_DIRECTION } from './media-control.messages.js';
import { MEDIA_CONTROL_PATH } from './media-control.socket.js';
import { DIRECT_CALLS_PER_PERSON } from './media-rooms.js';

type Json = Record<string, unknown>;

const RESULTS =
  'Results (`response.result`) by request: `room.join` → `{ routerRtpCapabilities, self, revision, producers, resumed, encryption, e2ee }` ' +
  '(`self`: the member\'s own entry; `revision`: that of the room view the join made, which, or a newer one, came whole before ' +
  'this answer as `room.state` and its pages; `producers`: what is already published (announced), to `consume`; one being checked comes as `producer.added`); `transport.create` → `{ transportId, iceParameters, ' +
  'iceCandidates, dtlsParameters }`; `produce` → `{ producerId }`; `consume` → `{ consumerId, producerId, kind, ' +
  'rtpParameters }` (paused until `consumer.resume`); `screen.start` → `{ screenProfile, encodings, codecOptions, ' +
  'contentHint, degradationPreference }` (the encoding hint of the space\'s `screenProfile`); `grant.refresh` → ' +
  '`{ grantExpiresAt }`; `ping` and every other request → `{}`.';

const REFUSALS =
  'Refusal codes (`response.error.code`): the room\'s own are listed with the room rules below. The control plane adds: ' +
  '`not_joined` (send `room.join` first, or the connection closed while the request ran, or a `room.leave` the room applied after a `room.join` undid it before the join completed); `scope_missing` (the grant ' +
  'lacks the scope the request needs: `media:join-space` or `media:direct-call` to join, `media:request-speak` for ' +
  '`floor.take`, `hand.raise` and `speaker.accept`, `media:publish` for `produce` and `screen.start`); `media_scope_unknown` (the space is no longer configured); `direct_call_limit` (`room.join` of a ' +
  `direct call while the person is in ${DIRECT_CALLS_PER_PERSON} calls of the Environment already, counting those ` +
  'left without `room.leave` until their reconnect grace ends; refused before the room exists); `policy_invalid` (the configuration ' +
  'fails the Media policy check); `publisher_denied` (the Environment backend did not allow publishing); ' +
  '`e2ee_not_used` (key envelopes only in `sfu_blind` rooms); `target_not_connected`; `media_grant_invalid` ' +
  '(`grant.refresh` with a grant that is not live, lacks a scope of the current one, or is for someone or somewhere else); ' +
  '`media_unavailable` (this node cannot host the room\'s media right now, or a media worker died during the call; ' +
  'a joined member so refused is sent `media.reset` once the room is served again, and makes its media then); `transport_limit` (already ' +
  `${TRANSPORTS_PER_DIRECTION} transports of that direction: leave and join again); \`transport_not_found\`, ` +
  '`transport_wrong_direction`, `transport_already_connected`, `producer_not_found`, `producer_exists` (`produce` of a ' +
  'source the member already publishes, or is publishing: one microphone and one screen at a time; `producer.close` ' +
  'the first), `consumer_not_found`, ' +
  '`cannot_consume` (the receiver\'s capabilities cannot take that producer), `invalid_media_parameters` (malformed ' +
  'or unsupported RTP/DTLS parameters or capabilities, a MID or SSRC already on the transport, a `produce` whose `kind` ' +
  'is not its `source`\'s or whose `rtpParameters` name a codec of another kind, e.g. `video/VP8` as `audio`); `runtime_coordination_unavailable` (the stores did not answer: ' +
  'retry); `internal_error` (a failure of ours, logged under the error\'s `requestId`).';

const CLOSE_CODES =
  'Close codes: 1000 normal; 1001 server shutting down (reconnect: a member keeps its place for the reconnect grace); ' +
  '1003 a frame of the other type than the negotiated codec\'s (binary on JSON, text on msgpack); 1007 undecodable ' +
  'message (a text frame that is not UTF-8 is cut without a close frame: the client sees 1006); 1009 message over ' +
  'maxMessageBytes (past twice that, cut without a close frame: 1006); 1011 internal error; 4008 slow consumer; 4029 over ' +
  `requestsPerMinute; ${MediaCloseCode.grantEnded} the grant ended (its Runtime was superseded, released, lapsed or ` +
  `signed out); ${MediaCloseCode.replaced} replaced by a newer connection of the same person (maxConcurrentSessions ` +
  `${MEDIA_LIMITS.maxConcurrentSessions}); ${MediaCloseCode.grantExpired} the grant expired without \`grant.refresh\`; ` +
  `${MediaCloseCode.removed} removed from the room.`;

const UPGRADE_REFUSALS =
  'Upgrade refusals (HTTP, problem+json): 401 `media_grant_invalid` (no live Media `control` grant offered as ' +
  'subprotocol `registry.bearer.<grant>`; `WWW-Authenticate: Bearer realm="registry"`, with `error="invalid_token"` when ' +
  'a grant was offered); 403 `media_scope_missing` (the grant lacks `media:connect`), ' +
  '`media_origin_mismatch` (Origin is not the grant\'s); 404 `media_scope_unknown` (the grant\'s context scope names ' +
  `no configured space, and no direct call the Environment allows); 429 \`media_context_full\` (already ` +
  `${MEDIA_LIMITS.maxParticipantsPerContext} members hold a place in the context, maxParticipantsPerContext; a member who reconnects keeps theirs); 503 ` +
  '`runtime_coordination_unavailable`.';

/**
 * The AsyncAPI 3.0.0 document `media-v2-data-plane`: the Media control plane's WebSocket, built from the same zod
 * schemas that validate its traffic. `roomRules` is the room machine's states and transitions (the contract leaves
 * them "not shown"; ours are part of the document).
 */
export function buildMediaControlAsyncApi(options: { serverHost: string; version: string; roomRules: string }): Json {
  const inbound = asyncApiMessages(MediaV2ClientMessageSchema, 'client');
  const outbound = asyncApiMessages(MediaV2ServerMessageSchema, 'server');
  const refs = (names: string[]): Json => Object.fromEntries(names.map((n) => [n, { $ref: `#/components/messages/${n}` }]));
  const nameOf = (key: string): string => String((({ ...inbound, ...outbound })[key] as { name: string }).name);
  const operation = (action: 'send' | 'receive', key: string): Json => ({
    action,
    channel: { $ref: '#/channels/control' },
    summary: action === 'receive' ? `The client sends \`${nameOf(key)}\`.` : `The server sends \`${nameOf(key)}\`.`,
    messages: [{ $ref: `#/channels/control/messages/${key}` }],
  });
  return {
    asyncapi: '3.0.0',
    id: 'urn:registry:plugins:media:media-v2-data-plane',
    info: {
      title: 'Media control plane (media-v2-data-plane)',
      version: options.version,
      description: [
        'The WebSocket of the Media plugin\'s backend component `control`: call signaling, space membership, media ' +
          'authorization and moderation. Media itself flows over WebRTC to the SFU; this channel negotiates it.',
        `Limits: maxMessageBytes ${MEDIA_LIMITS.maxMessageBytes}, each way: no client message may exceed it (1009), and no ` +
          'server message does, in either codec, so a client may set its WebSocket\'s maximum message size to it (the ' +
          'room view, 30-40 KB in a full stage, comes as `room.state` and `room.state.members` pages); ' +
          `requestsPerMinute ${MEDIA_LIMITS.requestsPerMinute} ` +
          `(a token bucket per person, the Environment's actor, shared by their reconnects: reconnecting does not ` +
          `start a fresh budget), maxParticipantsPerContext ${MEDIA_LIMITS.maxParticipantsPerContext}, ` +
          `maxConcurrentSessions ${MEDIA_LIMITS.maxConcurrentSessions} (a newer connection of the same person replaces the older).`,
        'Frames are JSON text (subprotocol `registry.v1.json`, the default) or msgpack binary (`registry.v1.msgpack`); ' +
          'browsers offer the grant as one more subprotocol, `registry.bearer.<grant>`, never echoed. Every request ' +
          'carries an `id` answered by exactly one `response`.',
        RESULTS,
        REFUSALS,
        UPGRADE_REFUSALS,
        CLOSE_CODES,
        options.roomRules,
      ].join('\n\n'),
      license: { name: 'MIT' },
    },
    servers: {
      rtc: {
        host: options.serverHost,
        protocol: 'wss',
        description: 'The Media control plane (`{rtc_url}`), on the registry gateway (uWebSockets.js).',
        security: [{ $ref: '#/components/securitySchemes/pluginGrant' }],
      },
    },
    defaultContentType: 'application/json',
    channels: {
      control: {
        address: MEDIA_CONTROL_PATH,
        title: 'Media control',
        description:
          'One connection per person in an Environment: a newer one replaces the older (4409), whatever its context ' +
          'scope. Admitted with a live Plugin Grant for `plg_media` component ' +
          '`control` holding `media:connect`, from the grant\'s origin. The context scope names the room: a configured ' +
          'space id, or `call:<anything>` for a direct call when `directCalls.enabled`.',
        servers: [{ $ref: '#/servers/rtc' }],
        messages: refs([...Object.keys(inbound), ...Object.keys(outbound)]),
      },
    },
    operations: {
      ...Object.fromEntries(Object.keys(inbound).map((key) => [`receive${key.slice('client'.length)}`, operation('receive', key)])),
      ...Object.fromEntries(Object.keys(outbound).map((key) => [`send${key.slice('server'.length)}`, operation('send', key)])),
    },
    components: {
      messages: { ...inbound, ...outbound },
      securitySchemes: {
        pluginGrant: {
          type: 'httpApiKey',
          name: 'Sec-WebSocket-Protocol',
          in: 'header',
          description: 'The Plugin Grant from `POST /v1/runtime/plugins/plg_media/grants`, offered as subprotocol `registry.bearer.<grant>`.',
        },
      },
    },
  };
}
