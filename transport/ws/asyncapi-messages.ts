import * as z from 'zod';

/** AsyncAPI message components built from the zod unions that validate a socket's traffic. */
type Json = Record<string, unknown>;
export type MessageUnion = z.ZodDiscriminatedUnion<readonly z.ZodObject[]>;

/** AsyncAPI's default schema format is a superset of JSON Schema draft 07. */
function payload(schema: z.ZodType): Json {
  const json = z.toJSONSchema(schema, { target: 'draft-7', io: 'output' }) as Json;
  delete json.$schema;
  return json;
}

/** `presence.update` → `presenceUpdate`: message keys must be identifiers. */
const keyOf = (type: string): string => type.replace(/[._]([a-z])/g, (_, c: string) => c.toUpperCase());

export function asyncApiMessages(union: MessageUnion, prefix: string): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const option of union.options) {
    const type = (option.shape as { type: z.ZodLiteral<string> }).type.value;
    out[`${prefix}${keyOf(type).replace(/^./, (c) => c.toUpperCase())}`] = {
      name: type,
      title: type,
      ...(option.description ? { summary: option.description } : {}),
      payload: payload(option),
    };
  }
  return out;
}

