import { ExecutionContext, HttpException, NotFoundException } from '@nestjs/common';
import {
  describeError,
  matchesStoredErrors,
  rebuildError,
  type StoredError,
} from '../../lib/utils/error-codec';

const context = {} as ExecutionContext;

class DeclinedError extends Error {
  readonly secret = 'never stored';
}

describe('storeErrors matching', () => {
  it.each([
    [[402], 402, true],
    [[402], 403, false],
    [['4xx'], 499, true],
    [['4xx'], 500, false],
    [['5xx'], 503, true],
    [['4xx'], undefined, false],
  ] as const)('%j matches status %s: %s', (matchers, status, expected) => {
    expect(matchesStoredErrors(matchers, new Error(), context, status)).toBe(expected);
  });

  it('matches classes with instanceof and calls predicates; a throwing predicate does not match', () => {
    expect(matchesStoredErrors([DeclinedError], new DeclinedError(), context, 500)).toBe(true);
    expect(matchesStoredErrors([DeclinedError], new Error(), context, 500)).toBe(false);
    expect(matchesStoredErrors([HttpException], new NotFoundException(), context, 404)).toBe(true);
    const predicate = jest.fn((error: unknown) => error instanceof NotFoundException);
    expect(matchesStoredErrors([predicate], new NotFoundException(), context, 404)).toBe(true);
    expect(predicate).toHaveBeenCalledWith(expect.any(NotFoundException), context);
    const throwing = () => {
      throw new Error('bug');
    };
    expect(matchesStoredErrors([throwing], new Error(), context, 500)).toBe(false);
  });
});

describe('stored errors', () => {
  it('keep an HttpException’s class name, message and body on HTTP, and nothing else', () => {
    const stored = describeError(new NotFoundException({ reason: 'gone' }), 'http', []);
    expect(stored).toEqual({
      c: 'NotFoundException',
      m: 'Not Found Exception',
      r: { reason: 'gone' },
    });
    expect(describeError(new DeclinedError('no'), 'http', [])).toEqual({
      c: 'DeclinedError',
      m: 'no',
    });
    expect(describeError('a string', 'http', [])).toEqual({ c: '', m: 'a string' });
  });

  it('keep what only the other transport sends to nobody: no RPC payload on HTTP, no HTTP body on RPC', () => {
    const rpcLike = Object.assign(new Error('x'), {
      getError: () => ({ dsn: 'postgres://secret' }),
    });
    expect(describeError(rpcLike, 'http', [])).toEqual({ c: 'Error', m: 'x' });
    expect(describeError(rpcLike, 'rpc', [])).toMatchObject({ r: { dsn: 'postgres://secret' } });
    expect(describeError(new NotFoundException('y'), 'rpc', [])).toEqual({
      c: 'NotFoundException',
      m: 'y',
    });
  });

  it('rebuild through the transport, of the listed class when there is one', () => {
    const thrown = new NotFoundException('x');
    const plainStored = JSON.parse(
      JSON.stringify(describeError(thrown, 'http', [])),
    ) as StoredError;
    const plain = rebuildError(plainStored, [], (s) => new HttpException(s.r as object, 404));
    expect(plain).toBeInstanceOf(HttpException);
    expect(plain).not.toBeInstanceOf(NotFoundException);
    const matchers = [NotFoundException];
    const stored = JSON.parse(
      JSON.stringify(describeError(thrown, 'http', matchers)),
    ) as StoredError;
    const listed = rebuildError(stored, matchers, (s) => new HttpException(s.r as object, 404));
    expect(listed).toBeInstanceOf(NotFoundException);
    expect((listed as HttpException).getStatus()).toBe(404);
    expect((listed as HttpException).getResponse()).toEqual(stored.r);
    expect(listed.message).toBe('x');
  });

  it('rebuild a listed class by its place in the list, with its plain fields only', () => {
    class Declined extends Error {
      constructor(
        readonly code: string,
        readonly amount: number,
        readonly request: object,
      ) {
        super('declined');
      }
    }
    const twin = class Declined extends Error {};
    const matchers = [twin, Declined];
    const error = new Declined('insufficient_funds', 5, { headers: { authorization: 'secret' } });
    const stored = JSON.parse(
      JSON.stringify(describeError(error, 'http', matchers)),
    ) as StoredError;
    expect(stored).toEqual({
      c: 'Declined',
      m: 'declined',
      i: 1,
      n: 'Declined',
      p: { code: 'insufficient_funds', amount: 5 },
    });
    const rebuilt = rebuildError(stored, matchers, () => {
      throw new Error('not called: no transport body');
    });
    expect(rebuilt).toBeInstanceOf(Declined);
    expect(rebuilt).not.toBeInstanceOf(twin);
    expect(rebuilt).toMatchObject({ code: 'insufficient_funds', amount: 5, message: 'declined' });
    expect((rebuilt as Declined).request).toBeUndefined();
  });

  it('rebuild an error matched through a listed parent class as that parent class', () => {
    class DomainError extends Error {}
    class CardDeclined extends DomainError {
      readonly code = 'card_declined';
    }
    const matchers = [DomainError];
    const stored = JSON.parse(
      JSON.stringify(describeError(new CardDeclined('no'), 'http', matchers)),
    ) as StoredError;
    const rebuilt = rebuildError(stored, matchers, () => {
      throw new Error('not called: no transport body');
    });
    expect(rebuilt).toBeInstanceOf(DomainError);
    expect(rebuilt).toMatchObject({ code: 'card_declined', message: 'no' });
  });
});
