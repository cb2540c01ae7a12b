import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import type { ClaimRequest, ClaimResult } from '../idempotency.store';
import { describeError } from '../sql/errors';
import { schemaOf } from '../sql/options';
import type {
  ClaimParams,
  FoundTables,
  KeyParams,
  Missing,
  SqlContext,
  SqlDialect,
  SqlNotifier,
  SqlResult,
  SqlStatement,
} from '../sql/sql-dialect';
import { MIGRATIONS } from '../sql/sql-migrations';
import { resultRows } from '../sql/transaction';
import { PostgresConnections } from './postgres-connections';
import { PostgresListener } from './postgres-listener';
import { postgresListing } from './postgres-listing';
import { claimOutcome, type ClaimRow, inspected, type InspectRow } from './postgres-rows';
import { postgresMigration, postgresPreamble, script } from './postgres-schema';
import { quote, statements } from './postgres-statements';
import { postgresStepsTableName, stepStatements } from './postgres-steps';

/** The row of `delete` (`n`: a live record went) and `deleteWithSteps` (`steps`: live ones). */
interface DeleteRow {
  n: number;
  steps?: number;
}

/** Every statement of the store, for one table. */
type PostgresStatements = ReturnType<typeof statements> & ReturnType<typeof stepStatements>;

/** Table, schema or column missing: a missing migration, not an outage. */
const MISSING: Record<string, Missing> = {
  '42P01': 'table',
  '3F000': 'schema',
  '42703': 'columns',
};

/**
 * PostgreSQL for the SQL store core, on a node-postgres pool: every operation one statement (one
 * round trip, atomic), each sent as a prepared statement of its connection (named by a hash of its
 * text, so that each connection parses and plans it once). Waiters hear of changes through
 * LISTEN/NOTIFY on one channel named like the table, dispatched by key: one connection of the
 * pool is held for LISTEN from the first wait until the store closes.
 */
export class PostgresDialect implements SqlDialect {
  readonly name = 'PostgreSQL';
  readonly folder = 'postgres';
  readonly schemaWord = 'schema';
  readonly placeholders = '$n';
  readonly stepsTable: string;
  readonly sql: PostgresStatements;
  readonly listing = postgresListing;
  private readonly preparedNames = new Map<string, string>();
  /** The connections the store's close() waits for (and cuts, on a frozen server). */
  private readonly connections: PostgresConnections;

  constructor(
    private readonly pool: Pool,
    readonly table: string,
    ownsPool: boolean,
  ) {
    this.stepsTable = postgresStepsTableName(table);
    this.sql = { ...statements(table), ...stepStatements(table) };
    this.connections = new PostgresConnections(pool, ownsPool);
  }

  async exec(statement: Pick<SqlStatement<never>, 'name' | 'text' | 'adHoc'>, values: unknown[]) {
    const { text } = statement;
    const name = statement.adHoc ? undefined : this.preparedName(statement);
    const result = await this.pool.query({ name, text, values });
    const n = (result.rows[0] as { n?: unknown } | undefined)?.n;
    return {
      rows: result.rows,
      changed: typeof n === 'number' ? n : (result.rowCount ?? 0),
    } satisfies SqlResult;
  }

  changedIn(raw: unknown): number {
    return Number((resultRows(raw)[0] as { n?: unknown } | undefined)?.n) || 0;
  }

  missing(code: string): Missing | undefined {
    return MISSING[code];
  }

  async find(): Promise<FoundTables> {
    const { rows } = await this.pool.query<Record<string, boolean>>(
      `SELECT to_regclass($1) IS NOT NULL AS has_table, to_regclass($2) IS NOT NULL AS has_steps,
        EXISTS (SELECT FROM pg_namespace WHERE nspname = COALESCE($3, current_schema())) AS has_schema,
        EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'label'
          AND NOT attisdropped) AS has_listing`,
      [quote(this.table), quote(this.stepsTable), schemaOf(this.table) ?? null],
    );
    const [{ has_schema, has_table, has_steps, has_listing }] = rows;
    return { schema: has_schema, table: has_table, steps: has_steps, listing: has_listing };
  }

  /**
   * What `found` lacks, in one implicit transaction under the advisory lock (see
   * postgresPreamble): the schema of a qualified table, the records' table, the steps table,
   * the listing's columns and indexes.
   */
  async create(found: FoundTables): Promise<void> {
    const ddl = [
      ...postgresPreamble(this.table),
      ...(found.table ? [] : postgresMigration(MIGRATIONS.records, this.table)),
      ...(found.steps ? [] : postgresMigration(MIGRATIONS.steps, this.table)),
      ...(found.listing ? [] : postgresMigration(MIGRATIONS.listing, this.table)),
    ];
    await this.pool.query(script(ddl)).catch((error: unknown) => {
      const schema = schemaOf(this.table);
      // 42501 insufficient_privilege: most often CREATE on the database, for the schema.
      if (schema && (error as { code?: string }).code === '42501') {
        throw new Error(
          `PostgresIdempotencyStore: ensureSchema could not create the schema "${schema}" or ` +
            `the table "${this.table}" in it: ${describeError(error)}. Create the schema (or ` +
            `grant CREATE), or apply sql/postgres/${MIGRATIONS.records} with your migrations.`,
          { cause: error },
        );
      }
      throw error;
    });
  }

  /**
   * One statement; a `resumable` claim is the same statement with the key's steps read in it
   * (see postgres-steps.ts), returned in index order when it takes the key.
   */
  async claim(
    { queries }: SqlContext,
    key: string,
    request: ClaimRequest,
  ): Promise<ClaimResult | undefined> {
    const statement = request.resumable ? this.sql.claimResumable : this.sql.claim;
    const rows = await queries.rows<ClaimRow, ClaimParams>(statement, { key, ...request });
    return claimOutcome(rows, request.waiting ?? false);
  }

  /** One statement, with the key's steps once the steps table exists. */
  async delete({ queries }: SqlContext, key: string): Promise<boolean> {
    const statement = (await queries.hasSteps()) ? this.sql.deleteWithSteps : this.sql.delete;
    const [row] = await queries.rows<DeleteRow, KeyParams>(statement, { key });
    return row.n === 1 || (row.steps ?? 0) > 0;
  }

  inspected(row: unknown) {
    return inspected(row as InspectRow | undefined);
  }

  /**
   * The statements notify (NOTIFY leaves at commit, inside the app's transaction too): waiters
   * are woken by the LISTEN connection, opened by the first wait. After it was lost and reopened,
   * every waiter is woken, since notifications may have been missed meanwhile.
   */
  notifier({ watchers, logger }: SqlContext): SqlNotifier {
    const track = this.connections.track.bind(this.connections);
    const listener = new PostgresListener(this.pool, this.table, watchers, logger, track);
    return {
      changed: () => {},
      committing: () => {},
      watching: async () => void (await listener.listen()),
      close: () => listener.close(),
    };
  }

  /** Ends the pool if the store owns it, and waits (bounded) for the LISTEN connection. */
  end(): Promise<void> {
    return this.connections.end();
  }

  /** `idempotency_<name>_<hash of the text>`, one per text. */
  private preparedName({ name, text }: Pick<SqlStatement<never>, 'name' | 'text'>): string {
    let prepared = this.preparedNames.get(text);
    if (prepared === undefined) {
      const hash = createHash('sha256').update(text).digest('hex').slice(0, 16);
      this.preparedNames.set(text, (prepared = `idempotency_${name}_${hash}`));
    }
    return prepared;
  }
}
