import type { IdempotencyOptions } from '../../lib';
import { checkForRootOptions, resolveRouteOptions, resolveRunOptions } from '../../lib/options';

/**
 * What the refusal of an option name tells the developer to do. Two hints send them the wrong
 * way today: a misspelt option of another level is suggested by its name alone (they fix the
 * spelling, and are refused again, now told where it goes), and `key` in run()'s options is sent
 * to `@Idempotent()`, where run()'s key is its own first argument.
 */
const refusal = (fn: () => unknown): string => {
  try {
    fn();
    return 'accepted';
  } catch (error) {
    return (error as Error).message;
  }
};

describe('hints of refused option names', () => {
  it('names where a misspelt option of another level goes, in the same message', () => {
    const route = refusal(() =>
      resolveRouteOptions({ encyption: { keys: [] } } as IdempotencyOptions, '@Idempotent()'),
    );
    expect(route).toMatch(/did you mean `encryption`/);
    expect(route).toMatch(/forRoot\(\)/);
    const run = refusal(() => resolveRunOptions({ storeTimout: 500 }, 'IdempotencyService.run'));
    expect(run).toMatch(/did you mean `storeTimeout`/);
    expect(run).toMatch(/forRoot\(\)/);
  });

  it("points `key` in run()'s options at run()'s first argument", () => {
    const run = refusal(() => resolveRunOptions({ key: 'order-1' }, 'IdempotencyService.run'));
    expect(run).toMatch(/first argument/);
  });
});

describe('the operator page named in forRoot()', () => {
  it('points `operatorPage` at IdempotencyOperatorPageModule.register()', () => {
    const root = refusal(() => checkForRootOptions({ operatorPage: { path: '/ops' } } as never));
    expect(root).toMatch(
      /`operatorPage` is not taken here: set it in IdempotencyOperatorPageModule/,
    );
  });
});
