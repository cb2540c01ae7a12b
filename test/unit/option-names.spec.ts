import { nearestName, unknownOptionProblem } from '../../lib/options/option-names';

describe('option names', () => {
  const known = ['encryption', 'lockTtl', 'ttl', 'scope', 'storeTimeout'];

  it('accepts objects whose every name is known', () => {
    expect(unknownOptionProblem({ ttl: 1, scope: 'a' }, known)).toBeUndefined();
    expect(unknownOptionProblem({}, known)).toBeUndefined();
  });

  it.each([
    ['encrypton', 'encryption'],
    ['lockTTL', 'lockTtl'],
    ['ttll', 'ttl'],
    ['scpoe', 'scope'],
    ['storeTimout', 'storeTimeout'],
  ])('names %s as unknown and suggests %s', (name, nearest) => {
    expect(unknownOptionProblem({ [name]: 1 }, known)).toBe(
      `unknown option \`${name}\` (did you mean \`${nearest}\`?)`,
    );
  });

  it('suggests nothing for a name far from every known one', () => {
    expect(unknownOptionProblem({ colour: 'red' }, known)).toBe('unknown option `colour`');
    expect(nearestName('x', ['encryption'])).toBeUndefined();
  });

  it('names a known name of another level with where it goes', () => {
    const elsewhere = { redis: 'IdempotencyModule.forRoot()' };
    expect(unknownOptionProblem({ redis: 'redis://' }, known, elsewhere)).toBe(
      '`redis` is not taken here: set it in IdempotencyModule.forRoot()',
    );
    expect(unknownOptionProblem({ rediss: 'redis://' }, known, elsewhere)).toBe(
      'unknown option `rediss` (did you mean `redis`? it is not taken here: set it in IdempotencyModule.forRoot())',
    );
  });

  it('suggests a name this place takes as it is, even where another level has it too', () => {
    // `key` is @IdempotentMethod()'s, and run() takes it as its first argument instead.
    const elsewhere = { key: "run()'s first argument" };
    expect(unknownOptionProblem({ kye: 1 }, [...known, 'key'], elsewhere)).toBe(
      'unknown option `kye` (did you mean `key`?)',
    );
  });

  it('is not fooled by names of Object.prototype', () => {
    expect(unknownOptionProblem({ toString: 1 }, known, {})).toBe('unknown option `toString`');
  });
});
