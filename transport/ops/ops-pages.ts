import * as z from 'zod';

/**
 * The operator listener's lists come a page at a time, the same size everywhere: this many unless `limit` says
 * otherwise, and at most OPS_PAGE_MAX, so one request never reads an unbounded list.
 */
export const OPS_PAGE_DEFAULT = 100;
export const OPS_PAGE_MAX = 1_000;

/** The `limit` query parameter of a paged operator list. */
export const opsPageLimit = z.coerce.number().int().min(1).max(OPS_PAGE_MAX).default(OPS_PAGE_DEFAULT);
