import { mysqlStepsTableName, postgresStepsTableName } from '../../lib';
import { databaseErrorCode } from '../../lib/stores/sql/errors';

describe('the steps table’s name', () => {
  it('is the records’ table’s and _steps, in the same schema', () => {
    expect(postgresStepsTableName('idempotency_records')).toBe('idempotency_records_steps');
    expect(mysqlStepsTableName('billing.records')).toBe('billing.records_steps');
  });

  it('fits what the database keeps, and stays unique to its table, for the longest names', () => {
    const [a, b] = ['a', 'b'].map((end) => `${'x'.repeat(62)}${end}`);
    for (const [name, max] of [
      [postgresStepsTableName, 63],
      [mysqlStepsTableName, 64],
    ] as const) {
      const [stepsA, stepsB] = [name(`s.${a}`), name(`s.${b}`)];
      expect(stepsA.startsWith('s.')).toBe(true);
      expect(stepsA.length - 2).toBeLessThanOrEqual(max);
      expect(stepsA).toMatch(/_[0-9a-f]{8}_steps$/);
      expect(stepsA).not.toBe(stepsB);
    }
  });
});

describe('databaseErrorCode', () => {
  const pg = Object.assign(new Error('relation does not exist'), { code: '42P01' });

  it('reads the driver’s code, also through the ORMs that wrap it', () => {
    expect(databaseErrorCode(pg)).toBe('42P01');
    expect(databaseErrorCode({ driverError: pg })).toBe('42P01'); // TypeORM
    expect(databaseErrorCode(new Error('query failed', { cause: pg }))).toBe('42P01'); // Drizzle
    expect(databaseErrorCode({ original: { code: 'ER_NO_SUCH_TABLE' } })).toBe('ER_NO_SUCH_TABLE');
    // Prisma's raw queries: its own code outside, the database's in meta.
    expect(databaseErrorCode({ code: 'P2010', meta: { code: '42P01' } })).toBe('42P01');
  });

  it('says nothing when nothing says', () => {
    expect(databaseErrorCode(new Error('no code'))).toBeUndefined();
    expect(databaseErrorCode(undefined)).toBeUndefined();
  });
});
