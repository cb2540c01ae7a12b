import { BadRequestException, ServiceUnavailableException } from '@nestjs/common';
import { IdempotencyRecords } from '../../lib/services/idempotency-records.service';
import { MemoryIdempotencyStore } from '../../lib/stores/memory/memory-idempotency.store';
import { resolveModuleOptions } from '../../lib/options';

describe('IdempotencyRecords', () => {
  it('answers 503 when the store does not answer within storeTimeout', async () => {
    const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    const hanging = new Promise<never>(() => {});
    jest.spyOn(store, 'inspect').mockReturnValue(hanging);
    jest.spyOn(store, 'delete').mockReturnValue(hanging);
    const records = new IdempotencyRecords(store, resolveModuleOptions({ storeTimeout: 20 }));
    const query = { key: 'k', route: 'POST /payments' };
    await expect(records.inspect(query)).rejects.toBeInstanceOf(ServiceUnavailableException);
    await expect(records.delete(query)).rejects.toBeInstanceOf(ServiceUnavailableException);
  });

  it('answers 400 for a query that names no record, and touches no store', async () => {
    const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    const inspect = jest.spyOn(store, 'inspect');
    const records = new IdempotencyRecords(store, resolveModuleOptions({}));
    await expect(records.inspect({ key: '', route: 'POST /p' })).rejects.toBeInstanceOf(
      BadRequestException,
    );
    await expect(records.inspect({ key: 'k', route: '' })).rejects.toBeInstanceOf(
      BadRequestException,
    );
    expect(inspect).not.toHaveBeenCalled();
  });
});
