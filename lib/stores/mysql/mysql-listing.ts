import type { SqlListingDialect } from '../sql/sql-listing-sql';
import { NOW, quoteMysql } from './mysql-statements';

/** The epoch as a DATETIME(6): the columns hold UTC, with no time zone to convert. */
const EPOCH = `CAST('1970-01-01' AS DATETIME(6))`;

/**
 * MySQL's SQL for the listing statements (sql-listing-sql.ts): `?` placeholders (a value bound
 * again where it is used again), durations in µs, the key compared by its bytes (VARBINARY).
 */
export const mysqlListing: SqlListingDialect = {
  now: NOW,
  key: '`key`',
  quote: quoteMysql,
  binder() {
    const values: unknown[] = [];
    return { values, bind: (value) => (values.push(value), '?') };
  },
  ordered: (column) => column,
  ago: (bind, ms) => `${NOW} - INTERVAL ${bind(Math.round(ms * 1000))} MICROSECOND`,
  at: (bind, us) => `${EPOCH} + INTERVAL ${bind(us)} MICROSECOND`,
  us: (time) => `TIMESTAMPDIFF(MICROSECOND, ${EPOCH}, ${time})`,
  under(bind, prefix) {
    // The key is bytes: its prefix is measured and searched in bytes too.
    const p = Buffer.from(`${prefix}{`);
    const starts = `LEFT(\`key\`, ${bind(p.length)}) = ${bind(p)}`;
    return `${starts} AND LOCATE('{', \`key\`, ${bind(p.length + 1)}) = 0`;
  },
};
