import { createHash } from 'node:crypto';

/**
 * The steps table of the records' table `table`: its name and `_steps`, in the same schema
 * (database on MySQL). A name longer than the database keeps whole (`max` characters: table
 * names are ASCII, see options.ts) is cut to fit, with a hash of the records' table's name in
 * it, so that it stays unique to that table.
 */
export function stepsTable(table: string, max: number): string {
  const dot = table.lastIndexOf('.');
  const schema = table.slice(0, dot + 1);
  const name = `${table.slice(dot + 1)}_steps`;
  if (name.length <= max) return schema + name;
  const hash = createHash('sha256').update(table).digest('hex').slice(0, 8);
  return `${schema}${name.slice(0, max - '_steps'.length - 9)}_${hash}_steps`;
}
