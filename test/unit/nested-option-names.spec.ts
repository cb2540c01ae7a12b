import { randomBytes } from 'node:crypto';
import type { IdempotencyModuleOptions, IdempotencyOptions } from '../../lib';
import { resolveModuleOptions, resolveRouteOptions, resolveRunOptions } from '../../lib/options';

/**
 * The option names inside the options that take an object. docs/options.md says every place
 * that takes options checks their names, and `localReplayCache: {...}`, `redis: {...}`,
 * `postgres: {...}` and `mysql: {...}` are checked; these are not. A slip in them is as silent as
 * one at the top level was: the option keeps its default, and for `transactional` that default
 * is the app's default connection, so the handler's writes (through the connection it meant) no
 * longer commit with the record.
 */
describe('option names inside option objects', () => {
  const route = (options: object) => () =>
    resolveRouteOptions(options as IdempotencyOptions, '@Idempotent()');
  const module = (options: object) => () =>
    resolveModuleOptions(options as IdempotencyModuleOptions);

  it('refuses a misspelt name in transactional: { connectionName }', () => {
    expect(route({ transactional: { connection: 'billing' } })).toThrow(/`connection`/);
    expect(route({ transactional: { conectionName: 'billing' } })).toThrow(
      /did you mean `connectionName`/,
    );
    expect(() =>
      resolveRunOptions({ transactional: { connection: 'billing' } }, 'IdempotencyService.run'),
    ).toThrow(/`connection`/);
  });

  it('refuses a misspelt name in compression: { algorithm, threshold, level }', () => {
    expect(route({ compression: { algoritm: 'gzip' } })).toThrow(/did you mean `algorithm`/);
    expect(module({ compression: { treshold: 0 } })).toThrow(/did you mean `threshold`/);
  });

  it('refuses a misspelt name in problemDetails: { typeBaseUri }', () => {
    expect(
      route({ problemDetails: { typeBaseUri: 'https://errors.example/', tpye: 'x' } }),
    ).toThrow(/`tpye`/);
  });

  it('refuses a name encryption: { keys } does not take, such as previousKeys', () => {
    // Keys are rotated by prepending to `keys`; a `previousKeys` beside them is ignored today,
    // and every record sealed with the previous key then answers 500.
    expect(
      module({ encryption: { keys: [randomBytes(32)], previousKeys: [randomBytes(32)] } }),
    ).toThrow(/`previousKeys`/);
  });
});
