import type { SqlListingDialect } from '../sql/sql-listing-sql';
import { quote } from './postgres-statements';

const NOW = 'statement_timestamp()';

/**
 * PostgreSQL's SQL for the listing statements (sql-listing-sql.ts): `$n` placeholders, typed
 * where PostgreSQL cannot tell their type, keys ordered by their bytes (`COLLATE "C"`), times
 * in whole µs (exact: `extract` is numeric from PostgreSQL 14, and rounding a double's is exact
 * before that).
 */
export const postgresListing: SqlListingDialect = {
  now: NOW,
  key: 'key',
  quote,
  binder() {
    const values: unknown[] = [];
    return { values, bind: (value) => `$${values.push(value)}` };
  },
  ordered: (column) => `${column} COLLATE "C"`,
  ago: (bind, ms) => `${NOW} - ${bind(ms)}::float8 * interval '1 millisecond'`,
  at: (bind, us) => `timestamptz 'epoch' + ${bind(us)}::float8 * interval '1 microsecond'`,
  us: (time) => `round(extract(epoch FROM ${time}) * 1000000)::bigint`,
  under(bind, prefix) {
    // LIKE, whose selectivity the planner reads from the key's statistics (a function of the
    // key would be guessed at 0.5 %, and a page of completed records planned as a full scan).
    const escaped = `${prefix.replace(/[!%_]/g, '!$&')}{`;
    const [starts, nested] = [bind(`${escaped}%`), bind(`${escaped}%{%`)];
    return `key LIKE ${starts} ESCAPE '!' AND key NOT LIKE ${nested} ESCAPE '!'`;
  },
};
