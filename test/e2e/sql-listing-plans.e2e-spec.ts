import { randomUUID } from 'node:crypto';
import type { ListedState } from '../../lib';
import { mysqlListing } from '../../lib/stores/mysql/mysql-listing';
import { postgresListing } from '../../lib/stores/postgres/postgres-listing';
import { listSql, type SqlListingDialect } from '../../lib/stores/sql/sql-listing-sql';
import { sqlDatabases, type SqlDatabase } from '../support/sql-databases';

/**
 * An index serves every page of every state (migration 003's, and the expiry index): among
 * 20 000 completed records, a page of the few others reads about as many rows as it returns, and
 * a page of completed records about a page of them. Read from the database's own account of the
 * statement as the store sends it: EXPLAIN ANALYZE (PostgreSQL), ANALYZE FORMAT=JSON (MariaDB).
 */
const databases = sqlDatabases();
const COMPLETED = 20_000;
const about = { route: 'POST /orders', label: 'label' };
const response = { meta: 'm', body: Buffer.from('done') };

beforeAll(async () => {
  for (const database of databases) await database.open();
});
afterAll(async () => {
  for (const database of databases) await database.close();
});

/** Rows the statement read from every table, and how (scan kinds and indexes). */
interface Reading {
  rows: number;
  scans: string[];
}

const READERS: Record<
  SqlDatabase['name'],
  (db: SqlDatabase, sql: string, values: unknown[]) => Promise<Reading>
> = {
  PostgreSQL: async (db, sql, values) => {
    const [row] = await db.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
      values,
    );
    const reading: Reading = { rows: 0, scans: [] };
    const walk = (node: PlanNode) => {
      if (node['Relation Name']) {
        const read = node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0);
        reading.rows += read * (node['Actual Loops'] ?? 1);
        reading.scans.push(`${node['Node Type']} ${node['Index Name'] ?? ''}`.trim());
      }
      node.Plans?.forEach(walk);
    };
    walk(row['QUERY PLAN'][0].Plan);
    return reading;
  },
  MariaDB: async (db, sql, values) => {
    const [row] = await db.query<Record<string, string>>(`ANALYZE FORMAT=JSON ${sql}`, values);
    const reading: Reading = { rows: 0, scans: [] };
    const walk = (node: unknown) => {
      if (!node || typeof node !== 'object') return;
      const table = node as Record<string, unknown>;
      if (table.table_name && table.access_type) {
        reading.rows += Math.round(Number(table.r_rows ?? 0) * Number(table.r_loops ?? 1));
        reading.scans.push(`${String(table.access_type)} ${String(table.key ?? '')}`.trim());
      }
      Object.values(table).forEach(walk);
    };
    walk(JSON.parse(Object.values(row)[0]));
    return reading;
  },
};

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

describe.each(databases)('$name store: listing reads an index', (database) => {
  const table = database.table('plans');
  const prefix = `plans-${randomUUID().slice(0, 8)}:`;
  const atoms: SqlListingDialect = database.name === 'PostgreSQL' ? postgresListing : mysqlListing;

  beforeAll(async () => {
    const store = database.store(table);
    await store.whenReady(10_000);
    const t = database.quote(table);
    const k = database.quote('key');
    const filler =
      database.name === 'PostgreSQL'
        ? `SELECT '${prefix}{filler-' || i || '}', 'c', 'fp', 'm', 'done', 'POST /orders', 'label',
             now() - i * interval '1 ms', now() - i * interval '1 ms', now() + interval '1 day'
           FROM generate_series(1, ${COMPLETED}) AS i`
        : `SELECT CONCAT('${prefix}{filler-', seq, '}'), 'c', 'fp', 'm', 'done', 'POST /orders',
             'label', UTC_TIMESTAMP(6) - INTERVAL seq * 1000 MICROSECOND,
             UTC_TIMESTAMP(6) - INTERVAL seq * 1000 MICROSECOND, UTC_TIMESTAMP(6) + INTERVAL 1 DAY
           FROM seq_1_to_${COMPLETED}`;
    await database.query(
      `INSERT INTO ${t} (${k}, state, fingerprint, meta, body, route, label, claimed_at,
         completed_at, expires_at) ${filler}`,
    );
    // 20 half-done runs, 10 running claims, 10 claims that died.
    for (let i = 0; i < 20; i++) {
      const key = `${prefix}{half-${i}}`;
      await store.claim(key, {
        token: 'a',
        fingerprint: 'fp',
        leaseMs: 60_000,
        resumable: true,
        about,
      });
      await store.recordStep(key, 'a', { index: 0, name: 'order', result: response }, 60_000);
      await store.release(key, 'a');
    }
    for (let i = 0; i < 10; i++) {
      await store.claim(`${prefix}{running-${i}}`, {
        token: 'a',
        fingerprint: 'fp',
        leaseMs: 60_000,
      });
      await store.claim(`${prefix}{died-${i}}`, { token: 'a', fingerprint: 'fp', leaseMs: 1 });
    }
    await database.query(database.name === 'PostgreSQL' ? `ANALYZE ${t}` : `ANALYZE TABLE ${t}`);
    await store.close();
  }, 60_000);

  it.each([
    ['half_done', 20],
    ['running', 10],
    ['stuck', 10],
    ['completed', 50],
  ] as [ListedState, number][])(
    'lists %s reading about as many rows as it returns (%d)',
    async (state, found) => {
      const statement = listSql(atoms, table, {
        prefix,
        state,
        limit: 50,
        stepsTable: `${table}_steps`,
      });
      const values = statement.bind(undefined);
      const rows = await database.query(statement.text, values);
      expect(rows).toHaveLength(state === 'completed' ? 51 : found);
      const reading = await READERS[database.name](database, statement.text, values);
      // The page's rows, the steps probed for each (half done, stuck), the other claims' rows
      // (the few pending ones), never the completed ones unless it lists them.
      expect({ rows: reading.rows, scans: reading.scans }).toEqual({
        rows: expect.any(Number),
        scans: expect.not.arrayContaining([expect.stringMatching(/^(Seq Scan|ALL)/)]),
      });
      expect(reading.rows).toBeLessThanOrEqual(4 * 51);
    },
  );
});
