import { type SqsMessage, sqsMessageKey } from '../../lib';

/**
 * `sqsMessageKey()` with `{ attribute }`: a Binary attribute's key is its bytes in base64, never
 * their UTF-8 decoding, which turns every byte that is not valid UTF-8 into the same replacement
 * character (two 16-byte ids became one key, and the second payment was deleted unrun). A String
 * or Number attribute's key is its text, as it always was.
 */
const binary = (bytes: number[]): SqsMessage => ({
  MessageId: 'm1',
  MessageAttributes: { id: { DataType: 'Binary', BinaryValue: Uint8Array.from(bytes) } },
});

const ID = { attribute: 'id' };

describe('sqsMessageKey() of a message attribute', () => {
  it('keys a Binary attribute by its bytes in base64', () => {
    const bytes = [0xde, 0xad, 0xbe, 0xef, 0x00, 0xff];
    expect(sqsMessageKey(binary(bytes), ID)).toBe(Buffer.from(bytes).toString('base64'));
  });

  it('gives two 16-byte ids that are not valid UTF-8 two keys', () => {
    const first = Array.from({ length: 16 }, (_, i) => 0x80 + i);
    const second = Array.from({ length: 16 }, (_, i) => 0xc0 + i);
    // What a UTF-8 decoding made of them: one text, for both.
    expect(Buffer.from(first).toString('utf8')).toBe(Buffer.from(second).toString('utf8'));
    const keys = [sqsMessageKey(binary(first), ID), sqsMessageKey(binary(second), ID)];
    expect(keys[0]).not.toBe(keys[1]);
    expect(keys.map((key) => Buffer.from(key as string, 'base64'))).toEqual([
      Buffer.from(first),
      Buffer.from(second),
    ]);
  });

  it('keys a Binary attribute that happens to be UTF-8 by its bytes too', () => {
    expect(sqsMessageKey(binary([...Buffer.from('p1')]), ID)).toBe('cDE=');
  });

  it('keys a String or Number attribute by its text, as before', () => {
    const message = (DataType: string, StringValue: string): SqsMessage => ({
      MessageId: 'm1',
      MessageAttributes: { id: { DataType, StringValue } },
    });
    expect(sqsMessageKey(message('String', 'pay-1'), ID)).toBe('pay-1');
    expect(sqsMessageKey(message('Number', '42'), ID)).toBe('42');
    expect(sqsMessageKey(message('String.uuid', 'é-1'), ID)).toBe('é-1');
  });

  it('falls back to the MessageId when the attribute is absent', () => {
    expect(sqsMessageKey({ MessageId: 'm1' }, ID)).toBe('m1');
  });
});
