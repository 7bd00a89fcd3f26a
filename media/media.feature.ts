import { readFileSync } from 'node:fs';
import { mediaRoomKind } from '../actors/media.actors.js';
import type { DeadlineChange } from '../machines/media-room/media-room.machine.js';
import type { RoomPolicy } from '../machines/media-room/media-room.policy.js';
import type { MediaDirectCallPolicyV2, MediaEnvironmentConfigV2 } from '../plugins/media/media-config.schema.js';
import { checkMediaEnvironmentConfig } from '../plugins/media/media-policy.check.js';
import { MEDIA_PLUGIN_ID, mediaPlugin } from '../plugins/media/media.plugin.js';
import { pluginInstallations } from '../plugins/plugins.feature.js';
import { runtimeServices } from '../runtime/runtime.feature.js';
import type { ServerParts } from '../server/server.js';
import { newId } from '../identity/ids.js';
import { buildMediaControlAsyncApi } from './control/media-control.asyncapi.js';
import { mediaControlSocket } from './control/media-control.socket.js';
import { MediaRooms, type RoomTarget } from './control/media-rooms.js';
import { authorizePublisher } from './publisher-authority/publisher-authority.client.js';
import { MediaWorkerPool } from './worker-pool.js';

/** A direct call when the configuration enables them without a policy of its own. */
export const DEFAULT_DIRECT_CALL_POLICY: MediaDirectCallPolicyV2 = Object.freeze({
  mode: 'direct_call',
  maxParticipants: 2,
  maxSpeakerSeats: 2,
  floorControl: 'open',
  raiseHand: 'disabled',
  screenShare: 'disabled',
  guestPolicy: 'account_required',
  encryption: 'sfu_blind',
  spatialAudio: 'disabled',
  reconnectGraceSeconds: 30,
});

/** A direct call's context scope: `call:` and anything the pattern allows (the Environment names its calls). */
export const DIRECT_CALL_SCOPE = /^call:/;

/**
 * The room a scope leads to under an installation's configuration; undefined when it names none. Its violations are
 * those of the whole configuration's cross-field check that concern it: every definition of a space id (a duplicate
 * is one), or the direct-call section.
 */
export function roomTarget(config: MediaEnvironmentConfigV2, scope: string): RoomTarget | undefined {
  const violations = checkMediaEnvironmentConfig(config);
  const under = (prefixes: readonly string[]): string[] =>
    violations.filter((v) => prefixes.some((p) => v.pointer === p || v.pointer.startsWith(`${p}/`))).map((v) => `${v.code} at ${v.pointer}`);
  const definitions = (config.spaces ?? []).flatMap((s, i) => (s.id === scope ? [i] : []));
  const first = definitions[0];
  if (first !== undefined) {
    const policy: RoomPolicy = config.spaces![first]!.policy;
    return { kind: 'space', policy, violations: under(definitions.map((i) => `/spaces/${i}`)) };
  }
  if (DIRECT_CALL_SCOPE.test(scope) && config.directCalls.enabled) {
    return { kind: 'call', policy: config.directCalls.policy ?? DEFAULT_DIRECT_CALL_POLICY, violations: under(['/directCalls']) };
  }
  return undefined;
}

// The room machine's rules are part of the protocol document (the contract leaves them "not shown").
const ROOM_RULES = readFileSync(new URL('../../machines/media-room/README.md', import.meta.url), 'utf8');

/**
 * The exact text of the `media-v2-data-plane` artifact for a public URL: served by the catalog
 * (`/v1/catalog/plugins/plg_media/artifacts/media-v2-data-plane`) and pinned by its SHA-256 in the manifest.
 */
export function mediaControlAsyncApiText(publicUrl: string): string {
  return JSON.stringify(buildMediaControlAsyncApi({ serverHost: new URL(publicUrl).host, version: mediaPlugin.version, roomRules: ROOM_RULES }));
}

/**
 * The Media plugin's server side on this node: the control-plane WebSocket, rooms as `media-room` actors, their
 * mediasoup resources on the node's worker pool (started on first use), and the protocol document.
 */
export function mediaFeature(): ServerParts {
  let rooms: MediaRooms | undefined;
  let socket: ReturnType<typeof mediaControlSocket> | undefined;
  let pool: Promise<MediaWorkerPool> | undefined;
  return {
    kinds: [mediaRoomKind((change: DeadlineChange) => rooms?.changedByDeadline(change))],
    build: async (services) => {
      const { host, clock, config, logger } = services;
      const log = logger.child({ component: 'media' });
      const { pluginGrants, activity } = await runtimeServices(services);
      const installations = pluginInstallations(services);
      const startPool = (): Promise<MediaWorkerPool> => {
        pool ??= MediaWorkerPool.create({ ...(config.mediaWorkers ? { size: config.mediaWorkers } : {}), logger: log }).then(
          (started) => {
            started.onWorkerLost((lost) => services.metrics.media.workerLost(lost.replacementPid !== undefined));
            return started;
          },
          (error: unknown) => {
            pool = undefined;
            throw error;
          },
        );
        return pool;
      };
      rooms = new MediaRooms({
        host,
        clock,
        pool: startPool,
        logger: log,
        listenIp: config.mediaListenIp,
        consumerBudget: config.mediaConsumersPerRouter,
        hostingTtlMs: config.mediaHostingTtlSeconds * 1000,
        ...(config.mediaAnnouncedAddress ? { announcedAddress: config.mediaAnnouncedAddress } : {}),
        target: async (environmentId, scope) => {
          const configuration = await installations.configuration(environmentId, MEDIA_PLUGIN_ID);
          if (configuration?.state !== 'configured') return undefined;
          return roomTarget(configuration.value as MediaEnvironmentConfigV2, scope);
        },
        authorizePublisher: (url, question) =>
          authorizePublisher(
            url,
            {
              grant: question.grant,
              environmentId: question.environmentId,
              scope: question.scope,
              // A direct call is no configured space: the backend learns it from the scope (`call:…`).
              spaceId: DIRECT_CALL_SCOPE.test(question.scope) ? 'direct_calls' : question.scope,
              actorId: question.actorId,
              source: question.source,
              requestId: newId('par'),
            },
            { grantScopes: question.scopes, allowLoopback: config.mediaCallbackAllowLoopback },
          ).then((decision) => {
            if (!decision.allowed) log.info({ reason: decision.reason, detail: decision.detail, scope: question.scope }, 'publisher authority denied');
            return { allowed: decision.allowed, reason: decision.reason };
          }),
      });
      socket = mediaControlSocket({ grants: pluginGrants, activity, rooms, clock });
      return {
        stop: async () => {
          socket?.stop();
          await rooms?.close();
          const stopping = pool;
          // Forgotten, not kept closed: a server built again from the same parts starts a fresh pool on first use.
          pool = undefined;
          (await stopping?.catch(() => undefined))?.close();
        },
      };
    },
    sockets: (_services, mount) => {
      if (!socket) throw new Error('the media feature mounts its socket after it is built');
      mount(socket.endpoint);
    },
  };
}
