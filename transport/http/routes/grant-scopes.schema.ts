import * as z from 'zod';
import { GRANT_SCOPE } from '../../../runtime/grant-fence.js';

/** One grant scope, as every fenced grant (Environment Backend, Plugin) and every declaration of them spells it. */
export const GrantScope = z.string().regex(GRANT_SCOPE);

/** The scopes a Runtime asks a fenced grant for: 1–16, each once. Each route says which scopes it means. */
export const RequestedGrantScopes = z
  .array(GrantScope)
  .min(1)
  .max(16)
  .refine((s) => new Set(s).size === s.length, 'scopes must be unique');
