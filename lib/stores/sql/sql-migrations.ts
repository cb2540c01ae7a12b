/**
 * The one home of the SQL stores' DDL: the migration files the package ships in
 * `sql/<postgres|mysql>/`. Apps apply them with their migrations; `ensureSchema` and the
 * exported `*SchemaSql()` functions run the same files, read here, with the names in them
 * replaced for the configured table.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageFolder } from '../../utils/load-optional';

/** The migrations of each SQL store, in the order they apply. */
export const MIGRATIONS = {
  /** The records' table. */
  records: '001_idempotency_records.sql',
  /** The steps table of resumable runs. */
  steps: '002_idempotency_steps.sql',
  /** The records' columns and indexes that listing reads. */
  listing: '003_idempotency_listing.sql',
} as const;

/**
 * Every name a migration file gives: the records' table, its steps table (`_steps`) and their
 * indexes (`_<column>_idx`), backquoted or not.
 */
const NAME = /`?\bidempotency_records(_steps)?(\w*)`?/g;

/** A name of a migration file, as {@link migrationStatements} asks it renamed. */
export interface MigrationName {
  /** The steps table (or one of its indexes), not the records' table. */
  steps: boolean;
  /** An index's suffix after the table's name (`_expires_at_idx`), or '' for the table. */
  index: string;
}

/**
 * Where the package keeps its migrations: `sql/` at the package root, next to `lib/` and `dist/`.
 * Looked up on first use, as `lua/` is: an app on another store must not need it.
 */
let sqlDir: string | undefined;
const texts = new Map<string, string>();

/** A migration file as shipped, read once. */
function migrationText(folder: string, file: string): string {
  const path = join(folder, file);
  let text = texts.get(path);
  if (text === undefined) {
    sqlDir ??= packageFolder('sql');
    text = readFileSync(join(sqlDir, path), 'utf8');
    texts.set(path, text);
  }
  return text;
}

/**
 * The statements of `sql/<folder>/<file>`, without their comments and final semicolons, each
 * name in them replaced by `rename` (quoted as the database needs it).
 */
export function migrationStatements(
  folder: string,
  file: string,
  rename: (name: MigrationName) => string,
): string[] {
  return migrationText(folder, file)
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n')
    .replace(NAME, (_, steps: string | undefined, index: string) =>
      rename({ steps: steps !== undefined, index }),
    )
    .split(/;[ \t]*(?:\r?\n|$)/)
    .map((statement) => statement.trim())
    .filter((statement) => statement !== '');
}
