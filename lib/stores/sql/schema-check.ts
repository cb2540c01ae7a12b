/** What a SQL store reports when its table, or the table's schema, does not exist. */
export function schemaProblem(what: {
  /** 'PostgreSQL', 'MySQL'. */
  database: string;
  table: string;
  /** Whether the schema (PostgreSQL) or database (MySQL) the table belongs in exists. */
  schemaExists: boolean;
  /** 'schema' or 'database'. */
  schemaWord: string;
  /** The migration file in the package. */
  migration: string;
  /** The module option: 'postgres' or 'mysql'. */
  option: string;
  /** What the table holds: the records (default), or the steps of resumable runs. */
  holds?: 'records' | 'steps';
}): string {
  const steps = what.holds === 'steps';
  const dot = what.table.indexOf('.');
  const missing =
    !what.schemaExists && dot > 0
      ? `the ${what.schemaWord} "${what.table.slice(0, dot)}" of the table "${what.table}" does not exist`
      : `the table "${what.table}" does not exist`;
  return (
    `${what.database}: ${missing} (not an outage: the ` +
    `${steps ? 'steps of resumable runs' : 'idempotency records'} have nowhere to go). ` +
    `Apply ${what.migration} from the nestjs-idempotency package with your migrations, or set ` +
    `${what.option}: { ..., ensureSchema: true } to create it at boot. ` +
    `${steps ? 'Resumable requests' : 'Idempotent requests'} answer 503 until it exists.`
  );
}
