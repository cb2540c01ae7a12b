import { ExecutionContext } from '@nestjs/common';
import { lastValueFrom, toArray } from 'rxjs';
import { RpcContextAdapter } from '../../lib/adapters/rpc-context.adapter';
import { decodeResponse, encodeResponse, packResponse } from '../../lib/utils/response-codec';

describe('RPC reply values through the store', () => {
  const adapter = new RpcContextAdapter();
  const context = {} as ExecutionContext;

  /** Captures the values, stores them as the interceptor does, and replays them. */
  async function roundTrip(values: unknown[]): Promise<unknown[]> {
    const snapshot = adapter.capture(context, values);
    if (typeof snapshot === 'string') throw new Error(snapshot);
    const stored = await packResponse(encodeResponse(snapshot), { threshold: 0 });
    return lastValueFrom(adapter.replay(context, await decodeResponse(stored)).pipe(toArray()));
  }

  it('replays undefined and Buffers as they were emitted, not as JSON made them', async () => {
    const replayed = await roundTrip([undefined, Buffer.from([0, 255]), null, { a: [1] }, 'x']);
    expect(replayed).toEqual([undefined, Buffer.from([0, 255]), null, { a: [1] }, 'x']);
    expect(replayed).toHaveLength(5);
    expect(Buffer.isBuffer(replayed[1])).toBe(true);
  });

  it('replays an empty stream as empty', async () => {
    expect(await roundTrip([])).toEqual([]);
  });
});
