import { ExecutionContext } from '@nestjs/common';
import { lastValueFrom, toArray } from 'rxjs';
import { RpcContextAdapter } from '../../lib/adapters/rpc-context.adapter';
import { DEFAULT_OPTIONS } from '../../lib/options';
import { decodeResponse, encodeResponse, packResponse } from '../../lib/utils/response-codec';

describe('RPC reply values through the store', () => {
  const adapter = new RpcContextAdapter();
  const context = {} as ExecutionContext;

  /** Captures the values, stores them as the interceptor does, and replays them. */
  async function roundTrip(values: unknown[]): Promise<unknown[]> {
    const snapshot = adapter.capture(context, values);
    if (typeof snapshot === 'string') throw new Error(snapshot);
    const stored = await packResponse(encodeResponse(snapshot), { threshold: 0 });
    const replayed = adapter.replay(context, await decodeResponse(stored), DEFAULT_OPTIONS);
    return lastValueFrom(replayed.pipe(toArray()));
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

describe('the key header of a Kafka message (no broker runs in this suite)', () => {
  const adapter = new RpcContextAdapter();
  const options = { headerName: 'Idempotency-Key' } as Parameters<typeof adapter.readKey>[1];
  /** A context shaped like Nest's KafkaContext: getMessage() holds the record, headers Buffers. */
  const kafka = (headers: Record<string, unknown>, data: unknown = {}) =>
    ({
      switchToRpc: () => ({
        getContext: () => ({ getMessage: () => ({ headers, value: data }) }),
        getData: () => data,
      }),
    }) as unknown as ExecutionContext;

  it('reads the key from a Buffer header, in any case', () => {
    expect(adapter.readKey(kafka({ 'idempotency-key': Buffer.from('evt-1') }), options)).toBe(
      'evt-1',
    );
    expect(adapter.readKey(kafka({ 'Idempotency-Key': 'evt-2' }), options)).toBe('evt-2');
  });

  it('returns every value of a key sent twice (refused as invalid), and falls back to the payload', () => {
    const twice = kafka({
      'Idempotency-Key': Buffer.from('a'),
      'idempotency-key': Buffer.from('b'),
    });
    expect(adapter.readKey(twice, options)).toEqual(['a', 'b']);
    expect(adapter.readKey(kafka({}, { idempotencyKey: 'from-payload' }), options)).toBe(
      'from-payload',
    );
  });
});
