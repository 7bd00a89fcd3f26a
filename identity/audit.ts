import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../storage/database.js';

/**
 * One audit record. Written in the same transaction as the change it describes, so the trail never claims a change
 * that did not commit nor misses one that did. `actor` names who acted: `account:<id>` or `operator:<name>`.
 */
export interface AuditRecord {
  readonly action: string;
  readonly actor: string;
  readonly target: string;
  readonly reason?: string;
  readonly data?: Readonly<Record<string, unknown>>;
}

export async function writeAudit(db: Kysely<Database> | Transaction<Database>, record: AuditRecord, at: Date): Promise<void> {
  await db
    .insertInto('audit_events')
    .values({ at, action: record.action, actor: record.actor, target: record.target, reason: record.reason ?? null, data: JSON.stringify(record.data ?? {}) })
    .execute();
}

export interface AuditEntry extends AuditRecord {
  readonly id: number;
  readonly at: Date;
}

export async function readAudit(db: Kysely<Database>, filter: { target?: string; limit: number }): Promise<AuditEntry[]> {
  let query = db.selectFrom('audit_events').selectAll().orderBy('id', 'desc').limit(filter.limit);
  if (filter.target) query = query.where('target', '=', filter.target);
  const rows = await query.execute();
  return rows.map((r) => ({ id: r.id, at: r.at, action: r.action, actor: r.actor, target: r.target, ...(r.reason ? { reason: r.reason } : {}), data: r.data }));
}
