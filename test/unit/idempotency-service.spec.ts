import {
  IdempotencyKeyInvalidError,
  IdempotencyStoreUnavailableError,
} from '../../lib/errors/idempotency.errors';
import { IdempotencyService } from '../../lib/services/idempotency.service';
import { MemoryIdempotencyStore } from '../../lib/stores/memory/memory-idempotency.store';
import { recordKey } from '../../lib/core/record-key';
import { resolveModuleOptions } from '../../lib/options';

function service(options = {}) {
  const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
  const resolved = resolveModuleOptions({ metrics: false, ...options });
  return { store, run: new IdempotencyService(store, resolved) };
}

describe('IdempotencyService.run() (pure logic, memory store)', () => {
  it("keeps its records apart from a route's, whatever the scope is called", async () => {
    const { store, run } = service();
    const claim = jest.spyOn(store, 'claim');
    await run.run('k-1', async () => 1, { scope: 'POST /payments' });
    const [key] = claim.mock.calls[0];
    // The record an HTTP route `POST /payments` (or a key space of that name) would use.
    expect(key).not.toBe(recordKey('idempotency:', 'POST /payments', 'k-1'));
    expect(key).not.toBe(recordKey('idempotency:', 'space:POST /payments', 'k-1'));
    expect(key).toBe(recordKey('idempotency:', 'run:POST /payments', 'k-1'));
  });

  it('takes integers as keys: 42, 42n and "42" name one record', async () => {
    const { run } = service();
    let runs = 0;
    const fn = async () => ++runs;
    await run.run(42, fn);
    await run.run(42n, fn);
    await run.run('42', fn);
    expect(runs).toBe(1);
  });

  it('refuses bad keys, scopes and options before touching the store', async () => {
    const { store, run } = service({ maxKeyLength: 8 });
    const claim = jest.spyOn(store, 'claim');
    const fn = jest.fn(async () => 1);
    await expect(run.run('', fn)).rejects.toBeInstanceOf(IdempotencyKeyInvalidError);
    await expect(run.run('123456789', fn)).rejects.toBeInstanceOf(IdempotencyKeyInvalidError);
    await expect(run.run(1.5, fn)).rejects.toBeInstanceOf(IdempotencyKeyInvalidError);
    await expect(run.run('k', fn, { scope: '' })).rejects.toThrow(/scope/);
    await expect(run.run('k', fn, { lockTtl: -1 })).rejects.toThrow(/lockTtl/);
    expect(claim).not.toHaveBeenCalled();
    expect(fn).not.toHaveBeenCalled();
  });

  it('fails closed when the store does not answer the claim: fn does not run', async () => {
    const { store, run } = service({ storeTimeout: 20 });
    jest.spyOn(store, 'claim').mockReturnValue(new Promise(() => {}));
    const fn = jest.fn(async () => 1);
    await expect(run.run('k', fn)).rejects.toBeInstanceOf(IdempotencyStoreUnavailableError);
    expect(fn).not.toHaveBeenCalled();
  });

  it('returns a result it cannot store, and releases the key so the next call runs fn', async () => {
    const { run } = service();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    let runs = 0;
    const fn = async () => (++runs, cyclic);
    await expect(run.run('k', fn)).resolves.toBe(cyclic);
    await expect(run.run('k', fn)).resolves.toBe(cyclic);
    expect(runs).toBe(2);
  });

  it("never hands one scope and key another's result, whatever text they hold (NUL included)", async () => {
    const { run } = service();
    const fnA = jest.fn(async () => 'A');
    const fnB = jest.fn(async () => 'B');
    await expect(run.run('c', fnA, { scope: 'tenant\0b' })).resolves.toBe('A');
    await expect(run.run('b\0c', fnB, { scope: 'tenant' })).resolves.toBe('B');
    expect(fnB).toHaveBeenCalledTimes(1);
  });

  it('rejects a misspelt option before fn runs, naming the option it meant', async () => {
    const { store, run } = service();
    const claim = jest.spyOn(store, 'claim');
    const fn = jest.fn(async () => 1);
    const options = { scpoe: 'orders' } as unknown as { scope: string };
    await expect(run.run('k', fn, options)).rejects.toThrow(
      'IdempotencyService.run: unknown option `scpoe` (did you mean `scope`?)',
    );
    expect(claim).not.toHaveBeenCalled();
    expect(fn).not.toHaveBeenCalled();
  });
});
