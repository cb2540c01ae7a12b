import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  decodeResponse,
  encodeResponse,
  packResponse,
  unreplayableReason,
} from '../../lib/utils/response-codec';

/** A realistic JSON body: orders with varied values, about `count` * 200 bytes. */
function orders(count: number) {
  return Array.from({ length: count }, (_, i) => ({
    id: `ord_${(i * 7919).toString(36)}`,
    customer: { id: 1000 + (i % 97), email: `customer${i % 97}@example.com` },
    lines: [{ sku: `SKU-${i % 31}`, quantity: (i % 5) + 1, price: ((i * 37) % 10_000) / 100 }],
    status: ['paid', 'pending', 'shipped'][i % 3],
    createdAt: new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString(),
  }));
}

const bytesOf = (view: ArrayBufferView) =>
  Buffer.from(view.buffer, view.byteOffset, view.byteLength);

describe('response codec', () => {
  it('round-trips JSON, text, binary and empty bodies with status and headers', async () => {
    for (const value of [{ a: [1, 'two', null] }, 'plain', Buffer.from([0, 255, 10]), undefined]) {
      const stored = await packResponse(
        encodeResponse({ status: 201, headers: { location: '/x' }, value }),
        { threshold: 0 },
      );
      expect(await decodeResponse(stored)).toEqual({
        status: 201,
        headers: { location: '/x' },
        value,
        // A JSON body keeps its stored text too, which a replay may send as it is.
        ...(value?.constructor === Object && { json: JSON.stringify(value) }),
      });
    }
  });

  it('round-trips null, typed arrays and DataViews as the same type and bytes', async () => {
    const floats = new Float32Array([1.5, -2, 3.25]);
    const backing = new Uint8Array([7, 1, 2, 3, 7]);
    for (const value of [
      null,
      backing.subarray(1, 4),
      floats,
      new DataView(floats.buffer, 4, 8),
      new BigInt64Array([-1n, 2n ** 62n]),
    ]) {
      const decoded = await decodeResponse(
        await packResponse(encodeResponse({ status: 200, value }), { threshold: 0 }),
      );
      expect(decoded.value).toEqual(value);
      expect(decoded.value?.constructor).toBe(value?.constructor ?? undefined);
      if (value !== null) expect(bytesOf(decoded.value as ArrayBufferView)).toEqual(bytesOf(value));
    }
  });

  it('refuses a stored view type it does not know', async () => {
    const stored = await packResponse(encodeResponse({ value: new Uint8Array([1]) }), false);
    for (const name of ['Buffer', 'constructor', 'toString']) {
      const meta = JSON.stringify({ ...JSON.parse(stored.meta), a: name });
      expect(() => decodeResponse({ meta, body: stored.body })).toThrow(/view type/);
    }
  });

  it('tells streams of any kind and fetch Responses apart from values it can store', () => {
    expect(unreplayableReason(new Blob(['x']).stream())).toBe('a stream');
    expect(unreplayableReason(new Response('x'))).toBe('a fetch Response');
    expect(unreplayableReason(Readable.from(['x']))).toBe('a stream');
    for (const value of [null, undefined, 'text', { pipe: true }, new Uint8Array(1)]) {
      expect(unreplayableReason(value)).toBeUndefined();
    }
  });

  it.each(['brotli', 'gzip', 'deflate'] as const)(
    'compresses a 100 KB JSON body at least 5x with %s and restores it byte for byte',
    async (algorithm) => {
      const value = orders(560);
      const encoded = encodeResponse({ status: 200, value });
      expect(encoded.body.length).toBeGreaterThan(100_000);
      const stored = await packResponse(encoded, { algorithm });
      expect(JSON.parse(stored.meta).z).toBe(algorithm);
      expect(encoded.body.length / stored.body.length).toBeGreaterThanOrEqual(5);
      const decoded = await decodeResponse(stored);
      expect(JSON.stringify(decoded.value)).toBe(encoded.body.toString());
    },
  );

  it('leaves bodies under the threshold, incompressible bodies and compression: false alone', async () => {
    const small = encodeResponse({ value: { ok: true } });
    expect((await packResponse(small, { threshold: 1024 })).body).toEqual(small.body);
    const random = encodeResponse({
      value: Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 251)),
    });
    const noise = encodeResponse({ value: randomBytes(4096) });
    expect(JSON.parse((await packResponse(noise, {})).meta).z).toBeUndefined();
    expect(JSON.parse((await packResponse(random, false)).meta).z).toBeUndefined();
  });

  it('stores the body as it is when the compressor fails', async () => {
    const encoded = encodeResponse({ value: orders(20) });
    // A level zlib refuses (option validation keeps users from it) makes gzip throw.
    const stored = await packResponse(encoded, { algorithm: 'gzip', level: 42, threshold: 0 });
    expect(JSON.parse(stored.meta).z).toBeUndefined();
    expect(stored.body).toEqual(encoded.body);
  });

  it('does not store the JSON content type every framework sets anyway', () => {
    const json = encodeResponse({
      headers: { 'content-type': 'application/json; charset=utf-8', etag: '"1"' },
      value: {},
    });
    expect(json.meta.h).toEqual({ etag: '"1"' });
    const custom = encodeResponse({
      headers: { 'content-type': 'application/vnd.api+json' },
      value: {},
    });
    expect(custom.meta.h).toEqual({ 'content-type': 'application/vnd.api+json' });
  });
});
