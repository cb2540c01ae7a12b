import { createHash } from 'node:crypto';
import { mysqlStatements, pendingSql } from '../../lib/stores/mysql/mysql-statements';
import { statements } from '../../lib/stores/postgres/postgres-statements';

/**
 * Runs without steps cost what they cost before steps existed: the SQL stores send them the
 * statements of runs that are not resumable, never a resumable run's (postgres-steps.ts,
 * mysql-steps.ts build theirs from these). The texts are pinned, so that a change of what every
 * request sends is a deliberate one: the last was listing (migration 003: the claim keeps the
 * route, label and claim time, a release keeps the row of a half-done run, the sweeper keeps
 * what listing shows; the claim answers its own token's claim sent again as claimed).
 */
const digest = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

it('sends PostgreSQL the statements of runs without steps, as pinned', () => {
  const sql = statements('idempotency_records');
  expect({
    claim: digest(sql.claim.text),
    complete: digest(sql.complete.text),
    release: digest(sql.release.text),
    extend: digest(sql.extend.text),
    inspect: digest(sql.inspect.text),
    delete: digest(sql.delete.text),
    sweep: digest(sql.sweep.text),
  }).toEqual({
    claim: '1daadfc75882a799',
    complete: '340ad851b845b641',
    release: '2f1ad35e14d6d217',
    extend: '096e3944fe2b725e',
    inspect: 'b585d10ea72d3265',
    delete: '273a35d22effda48',
    sweep: '60504b0a8d5d8bf4',
  });
});

it('sends MySQL the statements of runs without steps, as pinned', () => {
  const sql = mysqlStatements('idempotency_records');
  expect({
    claim: digest(sql.claim.text),
    lookup: digest(sql.lookup.text),
    complete: digest(sql.complete.text),
    release: digest(sql.release.text),
    extend: digest(sql.extend.text),
    inspect: digest(sql.inspect.text),
    deleteLive: digest(sql.deleteLive.text),
    deleteAny: digest(sql.deleteAny.text),
    sweep: digest(sql.sweep.text),
    pending: digest(pendingSql('idempotency_records', 3)),
  }).toEqual({
    claim: 'feb2d4c794ebf990',
    lookup: '42c1c5a4f7629f30',
    complete: '1383bcd29d5292e8',
    release: 'c5bde085325e9c14',
    extend: '22c915842865d1d1',
    inspect: '6ebac7ddc3208307',
    deleteLive: '4fa4d7c7656a8454',
    deleteAny: '20dfa50cfcdbc864',
    sweep: '375e0361bdc28235',
    pending: '387c6bfeb7e970b3',
  });
});
