import type pg from 'pg';

/** One node of Postgres's `EXPLAIN (FORMAT JSON)` output, as far as the plan tests read it. */
export interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Subplan Name'?: string;
  /** With EXPLAIN ANALYZE: rows per loop, loops, and rows a filter discarded (over all loops). */
  readonly 'Actual Rows'?: number;
  readonly 'Actual Loops'?: number;
  readonly 'Rows Removed by Filter'?: number;
  readonly Plans?: readonly PlanNode[];
}

/** The plan Postgres would run `statement` with these parameters (a custom plan: the values are known to it). */
export async function explain(pool: pg.Pool, statement: string, params: readonly unknown[]): Promise<PlanNode> {
  const { rows } = await pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${statement}`, [...params]);
  return rows[0]!['QUERY PLAN'][0]!.Plan;
}

/** Every node of a plan, depth first. */
export function* planNodes(node: PlanNode): Generator<PlanNode> {
  yield node;
  for (const child of node.Plans ?? []) yield* planNodes(child);
}
