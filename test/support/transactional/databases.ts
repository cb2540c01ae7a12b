import type { IdempotencyModuleOptions } from '../../../lib';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../mysql';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../postgres';

/**
 * A database the transactional suites write to: the handler's rows (a payments table: id, item)
 * and the idempotency records live in it, so one transaction can commit both.
 */
export interface TestDatabase {
  /** In test titles. */
  name: string;
  /** The URL an ORM connects to. */
  url(): string;
  /** Connects (failing with a message naming the database when it does not answer). */
  connect(): Promise<OpenDatabase>;
}

/** A connected {@link TestDatabase}, with a payments table of its own. */
export interface OpenDatabase {
  /** The payments table (id, item), created by {@link TestDatabase.connect}. */
  payments: string;
  /** The records table the store creates (`ensureSchema`). */
  records: string;
  /** The store options of `IdempotencyModule.forRoot` for {@link records}. */
  store: Pick<IdempotencyModuleOptions, 'postgres' | 'mysql'>;
  /** How many payment rows `item` has, as committed. */
  rows(item: string): Promise<number>;
  /**
   * The transactions that last wrote the payment of `item` and the record under the store key
   * `recordKey` (PostgreSQL's `xmin`): equal when they committed together. Undefined where the
   * database has no such column (MariaDB).
   */
  writers?(item: string, recordKey: string): Promise<[string | undefined, string | undefined]>;
  /** Drops both tables and closes the connection. */
  close(): Promise<void>;
}

/** PostgreSQL (IDEMPOTENCY_TEST_POSTGRES_URL). */
export const postgres: TestDatabase = {
  name: 'PostgreSQL',
  url: testPostgresUrl,
  async connect() {
    const pool = await testPool();
    const payments = uniqueTable('tx_payments');
    const records = uniqueTable('tx_records');
    await pool.query(`CREATE TABLE "${payments}" (id serial PRIMARY KEY, item text)`);
    const xmin = async (table: string, column: string, value: string) =>
      (await pool.query(`SELECT xmin::text AS x FROM "${table}" WHERE ${column} = $1`, [value]))
        .rows[0]?.x as string | undefined;
    return {
      payments,
      records,
      store: {
        postgres: { connectionString: testPostgresUrl(), table: records, ensureSchema: true },
      },
      rows: async (item) =>
        Number(
          (await pool.query(`SELECT count(*) FROM "${payments}" WHERE item = $1`, [item])).rows[0]
            .count,
        ),
      writers: async (item, recordKey) => [
        await xmin(payments, 'item', item),
        await xmin(records, 'key', recordKey),
      ],
      async close() {
        await dropTable(pool, payments);
        await dropTable(pool, records);
        await pool.end();
      },
    };
  },
};

/** MariaDB or MySQL (IDEMPOTENCY_TEST_MYSQL_URL). */
export const mariadb: TestDatabase = {
  name: 'MariaDB',
  url: testMysqlUrl,
  async connect() {
    const pool = await testMysqlPool();
    const payments = uniqueMysqlTable('tx_payments');
    const records = uniqueMysqlTable('tx_records');
    await pool.query(
      `CREATE TABLE \`${payments}\` (id INT AUTO_INCREMENT PRIMARY KEY, item VARCHAR(100)) ENGINE=InnoDB`,
    );
    return {
      payments,
      records,
      store: { mysql: { uri: testMysqlUrl(), table: records, ensureSchema: true } },
      async rows(item) {
        const [found] = await pool.query(
          `SELECT COUNT(*) AS n FROM \`${payments}\` WHERE item = ?`,
          [item],
        );
        return Number((found as { n: number }[])[0].n);
      },
      async close() {
        await dropMysqlTable(pool, payments);
        await dropMysqlTable(pool, records);
        await pool.end();
      },
    };
  },
};
