import * as z from 'zod';
import {
  PUBLISH_SCOPE,
  PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES,
  PUBLISHER_AUTHORITY_OPERATION_ID,
  PUBLISHER_AUTHORITY_TIMEOUT_MS,
  PublisherAuthorityRequestSchema,
  PublisherAuthorityResponseSchema,
} from './publisher-authority.messages.js';

type Json = Record<string, unknown>;

export const PUBLISHER_AUTHORITY_ARTIFACT_ID = 'publisher-authority-api';
export const PUBLISHER_AUTHORITY_MEDIA_TYPE = 'application/vnd.oai.openapi+json';

function schema(of: z.ZodType): Json {
  const json = z.toJSONSchema(of, { target: 'draft-2020-12', io: 'input' }) as Json;
  delete json.$schema;
  return json;
}

const FAILURE =
  `Every failure denies: no answer within ${PUBLISHER_AUTHORITY_TIMEOUT_MS} ms, a network error, any status but 200 ` +
  `(a redirect is an error and is never followed), a body over ${PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES} bytes, a body ` +
  'that is not JSON or not of the response shape, and any decision but `allow`.';

/**
 * The OpenAPI 3.1.0 document of the artifact `publisher-authority-api`. The operation is one the Environment backend
 * implements and the Media service calls, so it is a webhook of this API, not a path of a server the Plugin runs: its
 * address is whatever the space policy's `roleAuthorityUrl` says. The limits also appear as `x-` members so a
 * machine reading the artifact finds them without parsing prose.
 */
export function buildPublisherAuthorityOpenApi(version: string): Json {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Media publisher authority',
      version,
      summary: 'The host callback through which an Environment backend decides who may publish in its Media spaces.',
      description:
        'The Media plugin asks the Environment backend that owns a configured space whether a scope-bound actor may ' +
        'publish a microphone or a screen there. The backend is the authority: the Media service allows publishing ' +
        'only on an explicit `allow`. ' +
        FAILURE,
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [
      {
        url: '{roleAuthorityUrl}',
        description: 'The Environment backend that owns the space, at the callback address its space policy names.',
        variables: {
          roleAuthorityUrl: {
            default: 'https://environment-backend.invalid/media/publisher-authority',
            description: 'The `roleAuthorityUrl` of the space\'s policy, used as it is.',
          },
        },
      },
    ],
    tags: [{ name: 'Publisher authority', description: 'Implemented by the Environment backend; called by the Media service.' }],
    webhooks: {
      [PUBLISHER_AUTHORITY_OPERATION_ID]: {
        post: {
          operationId: PUBLISHER_AUTHORITY_OPERATION_ID,
          tags: ['Publisher authority'],
          summary: 'May this actor publish in this space?',
          description:
            'Sent as `POST` with a JSON body to the `roleAuthorityUrl` of the space\'s policy, before the Media service ' +
            'lets an actor publish. The address must be https and reach only public unicast addresses, checked on ' +
            'every address the name resolves to at each call (loopback, and http to it, only where the Media ' +
            'service\'s operator allows it for development); a private, link-local or other special-purpose ' +
            'address is refused without a connection and denies. The credential is the forwarded plugin grant ' +
            `in the body field \`grant\`; the Media service never sends one without \`${PUBLISH_SCOPE}\`. No other ` +
            'authentication is sent. ' +
            FAILURE,
          security: [],
          'x-target': 'environment_backend',
          'x-address': 'spaces[].policy.roleAuthorityUrl',
          'x-timeout-ms': PUBLISHER_AUTHORITY_TIMEOUT_MS,
          'x-max-response-bytes': PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES,
          'x-redirects': 'error',
          'x-on-failure': 'deny',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/PublisherAuthorityRequest' } } },
          },
          responses: {
            '200': {
              description: `The decision; at most ${PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES} bytes. Unknown members are ignored.`,
              content: { 'application/json': { schema: { $ref: '#/components/schemas/PublisherAuthorityResponse' } } },
            },
            '4XX': { description: 'Treated as a failure: publishing is denied.' },
            default: { description: 'Any status other than 200, redirects included, is a failure: publishing is denied.' },
          },
        },
      },
    },
    components: {
      schemas: {
        PublisherAuthorityRequest: schema(PublisherAuthorityRequestSchema),
        PublisherAuthorityResponse: schema(PublisherAuthorityResponseSchema),
      },
    },
  };
}

/** The exact bytes served as the artifact (and pinned by its digest in the manifest). */
export function publisherAuthorityOpenApiText(version: string): string {
  return JSON.stringify(buildPublisherAuthorityOpenApi(version));
}
