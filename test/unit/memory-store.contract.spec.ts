import { MemoryIdempotencyStore } from '../../lib';
import { runIdempotencyStoreContract } from '../../lib/testing';

let now = 1_000_000;

runIdempotencyStoreContract({
  name: 'MemoryIdempotencyStore (fake clock)',
  createStore: () => new MemoryIdempotencyStore({ now: () => now }),
  advanceTime: async (ms) => {
    now += ms;
  },
});
