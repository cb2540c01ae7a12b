import { withTimeout } from '../../lib/utils/timeout';

describe('withTimeout', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['setImmediate'] }));
  afterEach(() => jest.useRealTimers());

  it('resolves with the promise when it settles first, and clears its timer', async () => {
    await expect(withTimeout(Promise.resolve(7), 1_000, () => new Error('late'))).resolves.toBe(7);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('rejects with the promise’s error when it fails first', async () => {
    const failing = Promise.reject(new Error('boom'));
    await expect(withTimeout(failing, 1_000, () => new Error('late'))).rejects.toThrow('boom');
    expect(jest.getTimerCount()).toBe(0);
  });

  it('rejects with onTimeout() after ms, and a later failure of the promise stays handled', async () => {
    let fail!: (error: Error) => void;
    const slow = new Promise<never>((_, reject) => (fail = reject));
    const bounded = withTimeout(slow, 1_000, () => new Error('timed out'));
    jest.advanceTimersByTime(999);
    let settled = false;
    bounded.catch(() => (settled = true));
    await Promise.resolve();
    expect(settled).toBe(false);
    jest.advanceTimersByTime(1);
    await expect(bounded).rejects.toThrow('timed out');
    const unhandled = jest.fn();
    process.once('unhandledRejection', unhandled);
    fail(new Error('after the timeout'));
    await new Promise(setImmediate);
    process.off('unhandledRejection', unhandled);
    expect(unhandled).not.toHaveBeenCalled();
  });
});
