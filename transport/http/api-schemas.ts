import * as z from 'zod';

/**
 * Registry of the schemas that appear as named components of the OpenAPI document. Request and response bodies must
 * be registered here (`apiSchema`), so every body the API speaks has one name and one definition.
 */
export const apiSchemas = z.registry<{ id: string; description?: string }>();

export function apiSchema<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  apiSchemas.add(schema, description === undefined ? { id } : { id, description });
  return schema;
}

export const ErrorDetailSchema = apiSchema(
  'ErrorDetail',
  z.strictObject({
    pointer: z.string().describe('JSON Pointer to the offending member within the request part named by `in`.'),
    in: z.enum(['body', 'query', 'path', 'header']),
    code: z.string(),
    message: z.string(),
  }),
  'One specific problem found in a request.',
);

export const ProblemSchema = apiSchema(
  'Problem',
  z.object({
    type: z.string().describe('URI naming the problem type; ends with the `code`.'),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string().describe('Stable machine code.'),
    requestId: z.string().describe('Identifier of the request, also sent as the `X-Request-Id` header.'),
    errors: z.array(ErrorDetailSchema).optional(),
  }),
  'Flat RFC 7807 problem (`application/problem+json`): runtime authorization, account policy, fencing and ' +
    'coordination failures, and every error of the status, enrolment, device and management-session operations.',
);

export const ApiErrorSchema = apiSchema(
  'ApiError',
  z.object({
    error: z.object({
      code: z.string().describe('Stable machine code.'),
      message: z.string(),
      status: z.number().int(),
      requestId: z.string().describe('Identifier of the request, also sent as the `X-Request-Id` header.'),
      details: z.array(ErrorDetailSchema).optional(),
    }),
  }),
  'Nested error body (`application/json`): validation, catalog and management failures.',
);

export const OAuthErrorSchema = apiSchema(
  'OAuthError',
  z.object({
    error: z.string().describe('RFC 6749 error code, e.g. `invalid_grant`.'),
    error_description: z.string(),
    code: z.string().describe('Stable machine code, finer than `error` (e.g. `refresh_token_reused`).'),
    requestId: z.string().describe('Identifier of the request, also sent as the `X-Request-Id` header.'),
  }),
  'OAuth 2.0 error body (RFC 6749 section 5.2) of the token endpoint, with the stable `code` and `requestId` every error carries.',
);

export const PlatformStatusResponseSchema = apiSchema(
  'PlatformStatusResponse',
  z.strictObject({
    status: z
      .enum(['ok', 'unavailable', 'draining'])
      .describe('`ok` when every check passes; `draining` while this node shuts down (it finishes what it holds and takes nothing new).'),
    apiVersion: z.literal('0.1.0-alpha.7'),
    mode: z.enum(['single-node', 'cluster']),
    nodeId: z.string(),
    time: z.iso.datetime(),
    startedAt: z.iso.datetime(),
    checks: z.strictObject({
      storage: z.strictObject({
        status: z.enum(['ok', 'unavailable']),
        latencyMs: z.number().nonnegative().optional(),
      }),
    }),
  }),
  'Health of this node of the registry service.',
);

export const OpenApiDocumentSchema = apiSchema(
  'OpenApiDocument',
  z.looseObject({ openapi: z.string(), info: z.looseObject({ version: z.string() }) }),
  'This OpenAPI 3.1.0 description.',
);
