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
  it('keep an HttpException’s class name, message and body, and nothing else', () => {
    const stored = describeError(new NotFoundException({ reason: 'gone' }));
    expect(stored).toEqual({
      c: 'NotFoundException',
      m: 'Not Found Exception',
      r: { reason: 'gone' },
    });
    expect(describeError(new DeclinedError('no'))).toEqual({ c: 'DeclinedError', m: 'no' });
    expect(describeError('a string')).toEqual({ c: '', m: 'a string' });
  });

  it('rebuild through the transport, of the listed class when there is one', () => {
    const stored = JSON.parse(
      JSON.stringify(describeError(new NotFoundException('x'))),
    ) as StoredError;
    const plain = rebuildError(stored, [], (s) => new HttpException(s.r as object, 404));
    expect(plain).toBeInstanceOf(HttpException);
    expect(plain).not.toBeInstanceOf(NotFoundException);
    const listed = rebuildError(
      stored,
      [NotFoundException],
      (s) => new HttpException(s.r as object, 404),
    );
    expect(listed).toBeInstanceOf(NotFoundException);
    expect((listed as HttpException).getStatus()).toBe(404);
    expect((listed as HttpException).getResponse()).toEqual(stored.r);
    expect(listed.message).toBe('x');
  });

  it('rebuild other errors as an Error of the listed class, with their message only', () => {
    const stored = describeError(new DeclinedError('declined'));
    const error = rebuildError(stored, [DeclinedError], () => {
      throw new Error('not called: no transport body');
    });
    expect(error).toBeInstanceOf(DeclinedError);
    expect(error.message).toBe('declined');
    expect((error as DeclinedError).secret).toBeUndefined();
  });
});
