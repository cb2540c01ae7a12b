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

describe('withTimeout, many calls at once', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['setImmediate'] }));
  afterEach(() => jest.useRealTimers());

  const never = () => new Promise<never>(() => {});

  it('shares one timer among the calls of one length, each expiring at its own deadline', async () => {
    const first = withTimeout(never(), 1_000, () => new Error('first'));
    first.catch(() => {});
    jest.advanceTimersByTime(400);
    const second = withTimeout(never(), 1_000, () => new Error('second'));
    second.catch(() => {});
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(600);
    await expect(first).rejects.toThrow('first');
    let late = false;
    second.catch(() => (late = true));
    await Promise.resolve();
    expect(late).toBe(false);
    jest.advanceTimersByTime(400);
    await expect(second).rejects.toThrow('second');
    expect(jest.getTimerCount()).toBe(0);
  });

  it('keeps the timer while a call is pending, and leaves none once all settled', async () => {
    let answer!: (value: number) => void;
    const slow = withTimeout(new Promise<number>((r) => (answer = r)), 1_000, () => new Error('x'));
    const quick = withTimeout(Promise.resolve(1), 1_000, () => new Error('y'));
    await expect(quick).resolves.toBe(1);
    expect(jest.getTimerCount()).toBe(1);
    answer(2);
    await expect(slow).resolves.toBe(2);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('gives calls of other lengths their own deadlines', async () => {
    const long = withTimeout(never(), 5_000, () => new Error('long'));
    const short = withTimeout(never(), 100, () => new Error('short'));
    long.catch(() => {});
    jest.advanceTimersByTime(100);
    await expect(short).rejects.toThrow('short');
    jest.advanceTimersByTime(4_900);
    await expect(long).rejects.toThrow('long');
  });
});
