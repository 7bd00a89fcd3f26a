import { LEASE_VERSION } from '../transport/http/credentials.js';
import { API_VERSION } from '../transport/http/openapi.js';
import { asyncApiMessages as messages } from '../transport/ws/asyncapi-messages.js';
import {
  ControlServerMessage,
  PRESENCE_PAGE_SIZE,
  RUNTIME_MAX_OUTBOUND_BYTES,
  RuntimeClientMessage,
  RuntimeCloseCode,
  RuntimeServerMessage,
} from './runtime-socket.messages.js';
import {
  CONTROL_SOCKET_PATH,
  RUNTIME_SOCKET_IDLE_TIMEOUT_S,
  RUNTIME_SOCKET_PATH,
  RUNTIME_SOCKET_UPGRADE_RETRY_AFTER_S,
  RUNTIME_SOCKET_UPGRADES_PER_MINUTE,
  RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE,
} from './runtime-sockets.js';

type Json = Record<string, unknown>;

const CLOSE_CODES =
  'Close codes: 1000 normal; 1001 server shutting down (reconnect); 1003 frame type not that of the negotiated codec; ' +
  '1007 undecodable message (a text frame that is not UTF-8 is cut without a close frame: the client sees 1006); 1008 a ' +
  'client message on a read-only channel; 1009 message too large (past twice the limit the connection is cut ' +
  'without a close frame: 1006); 1011 internal ' +
  'error; 1013 try again later (the stores did not answer while the connection opened; an `error` message says so ' +
  `first); 4008 slow consumer; 4029 over the message rate (the session's: a newer socket continues its budget); ${RuntimeCloseCode.revoked} revoked (browser logout, or the ` +
  `sign-in ended: a device of the account signed out or was removed); ` +
  `${RuntimeCloseCode.superseded} superseded (another Runtime of the person took the lease); ${RuntimeCloseCode.released} ` +
  `session released; ${RuntimeCloseCode.replaced} replaced (a newer socket of the same kind and session opened: one ` +
  `runtime socket and one control channel per session); ` +
  `${RuntimeCloseCode.lapsed} the lease lapsed. Heartbeat: the server pings a connection that has been silent for most ` +
  `of ${RUNTIME_SOCKET_IDLE_TIMEOUT_S} s; one that sent nothing, not even the pong, within ${RUNTIME_SOCKET_IDLE_TIMEOUT_S} s ` +
  'is cut without a close frame (the client sees 1006). Browsers and WebSocket libraries answer pings on their own.';

/** Told on both channels: the refusal comes at the upgrade, as an HTTP answer, never on an open socket. */
const UPGRADE_BUDGET =
  `Upgrades are limited per session: at most ${RUNTIME_SOCKET_UPGRADES_PER_MINUTE} a minute to this channel (a burst of as ` +
  'many, per gateway node), refused upgrades included; past it the upgrade is answered `429` `rate_limited` ' +
  `(problem+json) with \`Retry-After: ${RUNTIME_SOCKET_UPGRADE_RETRY_AFTER_S}\`, before the sign-in is read. A page reconnecting ` +
  'after network blips, with any backoff, never meets it.';

/** The refusals of an upgrade, shared by both channels: a Problem (HTTP), with the Runtime plane's codes. */
const UPGRADE_REFUSALS_COMMON =
  '`401 runtime_authorization_expired` (the token expired, or its sign-in ended), `400 runtime_origin_required`, ' +
  '`403 runtime_origin_mismatch`, `404 runtime_session_not_found`';

const RUNTIME_UPGRADE_REFUSALS =
  ' A refused upgrade is answered before the socket opens with a Problem (`application/problem+json`): ' +
  '`401 runtime_token_invalid` (no bearer, or not a runtime access token), ' +
  UPGRADE_REFUSALS_COMMON +
  ', `403 insufficient_scope` (a sign-in granted without `runtime`), `400 runtime_session_required` (no `session`), ' +
  '`400 runtime_lease_required` (an active session without its lease, or a malformed one), `409 runtime_session_standby`, ' +
  '`409 runtime_session_superseded`, `409 runtime_session_ended`, `409 runtime_lease_stale` (not the current lease) ' +
  'and `503 runtime_coordination_unavailable` (the stores cannot answer: nobody is admitted).';

const CONTROL_UPGRADE_REFUSALS =
  ' A refused upgrade is answered before the socket opens with a Problem (`application/problem+json`): ' +
  '`401 runtime_token_invalid` (no control token, or another kind of token), ' +
  UPGRADE_REFUSALS_COMMON +
  ', `409 runtime_session_ended` (released, revoked or idled out) and `503 runtime_coordination_unavailable` (the ' +
  'stores cannot answer: nobody is admitted).';

const PERSON_UPGRADE_BUDGET =
  ` Whatever session is named, one person's upgrades of this channel are also limited to ` +
  `${RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE} a minute, answered the same way (\`Retry-After: ` +
  `${Math.ceil(60 / RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE)}\`).`;

/**
 * The AsyncAPI 3.0.0 description of the Runtime plane's WebSockets, built from the same zod schemas that validate the
 * messages, so the document and the server cannot disagree.
 */
export function buildRuntimeAsyncApi(serverHost: string): Json {
  const runtimeIn = messages(RuntimeClientMessage, 'client');
  const runtimeOut = messages(RuntimeServerMessage, 'server');
  const controlOut = messages(ControlServerMessage, 'control');
  const all = { ...runtimeIn, ...runtimeOut, ...controlOut };
  const refs = (names: string[]): Json => Object.fromEntries(names.map((n) => [n, { $ref: `#/components/messages/${n}` }]));
  const operation = (action: 'send' | 'receive', channel: string, names: string[], summary: string): Json => ({
    action,
    channel: { $ref: `#/channels/${channel}` },
    summary,
    messages: names.map((n) => ({ $ref: `#/channels/${channel}/messages/${n}` })),
  });
  const codecs =
    'Codec by subprotocol: `registry.v1.json` (text frames) or `registry.v1.msgpack` (binary frames); a client offering ' +
    'none gets JSON. Browsers offer the bearer as one more subprotocol, `registry.bearer.<token>`; it is never echoed.';
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Registry Runtime WebSockets',
      version: API_VERSION,
      description:
        'The runtime WebSocket of active Runtime sessions (lease-fenced presence, and the place realtime hints flow) and ' +
        'the read-only control channel of any live session. ' +
        codecs +
        ' The server speaks first: `ready` on the runtime socket, `session.activity` (`connected`) on the control ' +
        'channel. A client sends only once it has the 101 (RFC 6455 4.1): frames written before it are dropped unread ' +
        '(never answered, and on the control channel no 1008). ' +
        CLOSE_CODES,
    },
    servers: {
      registry: {
        host: serverHost,
        protocol: 'wss',
        description: 'The registry gateway (uWebSockets.js).',
        security: [{ $ref: '#/components/securitySchemes/subprotocolBearer' }],
      },
    },
    defaultContentType: 'application/json',
    channels: {
      runtime: {
        address: RUNTIME_SOCKET_PATH,
        title: 'Runtime socket',
        description:
          'For an active session, admitted only with its current lease. While open it renews the lease. When the lease ' +
          'moves the server sends `lease.ended` and closes with the matching code. Every message is checked against the ' +
          'lease first. Bearer: the runtime access token. `Origin` must be the Environment origin. Messages are at most ' +
          `16 KiB each way: no server message exceeds ${RUNTIME_MAX_OUTBOUND_BYTES} bytes in either codec (a client may ` +
          `set its maximum message size to it), so \`presence.list\` is answered a page of at most ${PRESENCE_PAGE_SIZE} ` +
          'members at a time: ask again with `after` set to the `next` of the page before until a page comes without it. ' +
          UPGRADE_BUDGET +
          PERSON_UPGRADE_BUDGET +
          RUNTIME_UPGRADE_REFUSALS,
        servers: [{ $ref: '#/servers/registry' }],
        messages: refs([...Object.keys(runtimeIn), ...Object.keys(runtimeOut)]),
        bindings: {
          ws: {
            method: 'GET',
            query: {
              type: 'object',
              required: ['session', 'lease', 'leaseVersion'],
              properties: {
                session: { type: 'string', description: 'The Runtime session id (`rts_…`).' },
                lease: { type: 'string', description: 'The lease id from the activation (`lse_…`).' },
                leaseVersion: { type: 'string', pattern: LEASE_VERSION.source, description: 'The lease version from the activation.' },
              },
            },
            bindingVersion: '0.1.0',
          },
        },
      },
      control: {
        address: CONTROL_SOCKET_PATH,
        title: 'Control channel',
        description:
          'Read-only, for a session in any live state (standby, active, superseded), with a control token from ' +
          '`POST /v1/runtime/control-token`. It streams the session\'s activity and browser-wide sign-out. Any client ' +
          'message closes it with 1008 (one over the 1 KiB message limit with 1009, as on every socket), so it cannot be ' +
          'used for presence or plugin APIs. One per session (a session ' +
          'is one page; each tab has its own): a newer channel of the session replaces the older, which closes ' +
          `${RuntimeCloseCode.replaced}. ` +
          UPGRADE_BUDGET +
          PERSON_UPGRADE_BUDGET +
          CONTROL_UPGRADE_REFUSALS,
        servers: [{ $ref: '#/servers/registry' }],
        messages: refs(Object.keys(controlOut)),
      },
    },
    operations: {
      ...Object.fromEntries(Object.keys(runtimeIn).map((n) => [`receive${n.slice('client'.length)}`, operation('receive', 'runtime', [n], `The client sends ${(all[n] as { name: string }).name}.`)])),
      ...Object.fromEntries(Object.keys(runtimeOut).map((n) => [`send${n.slice('server'.length)}`, operation('send', 'runtime', [n], `The server sends ${(all[n] as { name: string }).name}.`)])),
      ...Object.fromEntries(Object.keys(controlOut).map((n) => [`sendControl${n.slice('control'.length)}`, operation('send', 'control', [n], `The control channel sends ${(all[n] as { name: string }).name}.`)])),
    },
    components: {
      messages: all,
      securitySchemes: {
        subprotocolBearer: {
          type: 'httpApiKey',
          name: 'Sec-WebSocket-Protocol',
          in: 'header',
          description:
            'The bearer offered as the subprotocol `registry.bearer.<token>` (or, outside browsers, `Authorization: Bearer <token>`). ' +
            'It is checked at the upgrade only: the open socket lives on its session\'s sign-in and lease, checked every ' +
            'renewal round, not on the token\'s `exp`. A 401 of the upgrade carries `WWW-Authenticate: Bearer realm="registry"`, ' +
            'with `error="invalid_token"` when a bearer was offered and refused.',
        },
      },
    },
  };
}
