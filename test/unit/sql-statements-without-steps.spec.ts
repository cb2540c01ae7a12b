import { createHash } from 'node:crypto';
import { mysqlStatements, pendingSql } from '../../lib/stores/mysql/mysql-statements';
import { statements } from '../../lib/stores/postgres/postgres-statements';

/**
 * Runs without steps cost what they cost before steps existed: the SQL stores send them the
 * statements they always sent. The hashes are those of the texts as of the release before steps
 * (0.1.0); the statements of resumable runs are built from these (postgres-steps.ts,
 * mysql-steps.ts), never in their place.
 */
const digest = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

it('sends PostgreSQL the statements it sent before steps', () => {
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
    claim: '361c1382219f8fde',
    complete: '340ad851b845b641',
    release: 'c56d88538078ad95',
    extend: '096e3944fe2b725e',
    inspect: 'b585d10ea72d3265',
    delete: '273a35d22effda48',
    sweep: 'b2b81c571be1464f',
  });
});

it('sends MySQL the statements it sent before steps', () => {
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
    claim: 'a47206c2d1181930',
    lookup: '299248e8203a8dc8',
    complete: '1383bcd29d5292e8',
    release: '5d66c353be2f85d6',
    extend: '22c915842865d1d1',
    inspect: '6ebac7ddc3208307',
    deleteLive: '4fa4d7c7656a8454',
    deleteAny: '20dfa50cfcdbc864',
    sweep: 'e0683558a19179a9',
    pending: '387c6bfeb7e970b3',
  });
});
