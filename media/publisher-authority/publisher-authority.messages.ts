import * as z from 'zod';
import { ENVIRONMENT_ID } from '../../identity/environments.js';
import { idPattern } from '../../identity/ids.js';
import { MEDIA_CONTEXT_SCOPE, MEDIA_SPACE_ID } from '../../plugins/media/media-config.schema.js';

/**
 * The publisher-authority callback's wire contract (media-plugin.md, "Endpoints"): the Media service asks the owning
 * Environment backend, at the space policy's `roleAuthorityUrl`, whether an actor may publish. The limits are the
 * spec's; method, request fields and response shape are ours (the spec leaves them "not shown"). The client, the
 * OpenAPI document and any test backend all use these schemas.
 */

export const PUBLISHER_AUTHORITY_OPERATION_ID = 'authorizePublisher';
export const PUBLISHER_AUTHORITY_TIMEOUT_MS = 2000;
export const PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES = 4096;
/** The grant scope a forwarded grant must hold before the Media service forwards it at all. */
export const PUBLISH_SCOPE = 'media:publish';

export const PublisherAuthorityRequestSchema = z
  .object({
    grant: z
      .string()
      .min(1)
      .max(4096)
      .describe(
        `The plugin grant the participant connected with, forwarded as the credential. It holds \`${PUBLISH_SCOPE}\`; ` +
          'the backend introspects it with the registry and checks that its actor and Environment are the ones named here.',
      ),
    environmentId: z.string().regex(ENVIRONMENT_ID).describe('The Environment that owns the space (and this backend).'),
    scope: z.string().min(1).max(96).regex(MEDIA_CONTEXT_SCOPE).describe('The connection context `scope` the participant joined under.'),
    spaceId: z.string().min(1).max(80).regex(MEDIA_SPACE_ID).describe('The configured space, by its `spaces[].id`.'),
    actorId: z.string().regex(idPattern('act')).describe('The participant: the pairwise actor id this Environment knows them by.'),
    source: z.enum(['microphone', 'screen']).describe('What the actor would publish.'),
    requestId: z
      .string()
      .regex(/^[A-Za-z0-9._~-]{8,128}$/)
      .describe('Identifies this question in both parties\' logs; a retry asks again with a new one.'),
  })
  .strict();

export const PublisherAuthorityResponseSchema = z.object({
  decision: z.enum(['allow', 'deny']).describe('Only `allow` lets the actor publish.'),
  reason: z.string().max(512).optional().describe('Why, for logs; never shown as authority.'),
});

export type PublisherAuthorityRequest = z.input<typeof PublisherAuthorityRequestSchema>;
export type PublisherAuthorityResponse = z.output<typeof PublisherAuthorityResponseSchema>;
