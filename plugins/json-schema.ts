import * as z from 'zod';

export type JsonSchema = Readonly<Record<string, unknown>>;

/**
 * A zod schema as the JSON Schema (draft 2020-12) a Plugin manifest publishes: the shape a document must have on the
 * way in (`io: 'input'`, so a member with a default is not required). An integer literal is spelled `type: integer`
 * (zod says `number`), so a constant such as a direct call's 2 participants reads as the integer it is.
 */
export function toJsonSchema(schema: z.ZodType): JsonSchema {
  return z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'input',
    override: ({ zodSchema, jsonSchema }) => {
      const def = zodSchema._zod.def;
      if (def.type === 'literal' && (def as z.core.$ZodLiteralDef<z.core.util.Literal>).values.every((v) => Number.isInteger(v))) {
        jsonSchema.type = 'integer';
      }
    },
  }) as JsonSchema;
}
