import { resolveModuleOptions } from '../../lib/options';

describe('module option abandonedAfter', () => {
  it('is 15 minutes unless set, in ms', () => {
    expect(resolveModuleOptions({}).abandonedAfter).toBe(900_000);
  });

  it.each([
    [250, 250],
    ['2m', 120_000],
    ['1.5s', 1_500],
    [false, false],
  ] as const)('takes %p as %p', (given, resolved) => {
    expect(resolveModuleOptions({ abandonedAfter: given }).abandonedAfter).toBe(resolved);
  });

  it.each([0, -1, 1.5, Infinity, 'soon', '', true, null, {}])(
    'fails boot on %p, naming the option',
    (given) => {
      expect(() => resolveModuleOptions({ abandonedAfter: given as never })).toThrow(
        /IdempotencyModule: abandonedAfter must be/,
      );
    },
  );

  it('is a module option only: misspelt, it names the nearest', () => {
    expect(() => resolveModuleOptions({ abandonedAftr: '1m' } as never)).toThrow(
      /did you mean `abandonedAfter`/,
    );
  });
});
