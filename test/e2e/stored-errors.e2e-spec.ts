import {
  ArgumentsHost,
  Catch,
  Controller,
  ExceptionFilter,
  Post,
  UseFilters,
} from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { Idempotent } from '../../lib';
import { appForSuite } from '../support/http-app';
import { cleanUpPrefix, storeOptions, STORES, uniquePrefix } from '../support/redis';
import { PLATFORMS, post } from '../support/test-app';

/**
 * storeErrors promises: "A replayed error has the same status, body and allowlisted headers" as
 * the first one, "so exception filters answer as the first time". These throw errors whose first
 * answer depends on more than what is stored (class name, message, getResponse()/getError()).
 */

/** A domain error with its own field, which the app's filter puts in the body. */
class CardDeclinedError extends Error {
  constructor(readonly declineCode: string) {
    super('card declined');
  }
}

/** Two modules' errors that share a class name (or any two classes in a minified bundle). */
function declinedErrorClass() {
  return class DeclinedError extends Error {};
}
const PaymentDeclined = declinedErrorClass();
const ShipmentDeclined = declinedErrorClass();

type Reply = { status(code: number): Reply; code?(code: number): Reply; send(body: unknown): void };
function reply(host: ArgumentsHost, status: number, body: unknown) {
  const response = host.switchToHttp().getResponse<Reply>();
  (typeof response.code === 'function' ? response.code(status) : response.status(status)).send(
    body,
  );
}

@Catch(CardDeclinedError)
class CardDeclinedFilter implements ExceptionFilter {
  catch(error: CardDeclinedError, host: ArgumentsHost) {
    reply(host, 402, { declined: true, code: error.declineCode });
  }
}

@Catch(PaymentDeclined)
class PaymentDeclinedFilter implements ExceptionFilter {
  catch(_error: Error, host: ArgumentsHost) {
    reply(host, 402, { declined: 'payment' });
  }
}

@Catch(ShipmentDeclined)
class ShipmentDeclinedFilter implements ExceptionFilter {
  catch(_error: Error, host: ArgumentsHost) {
    reply(host, 409, { declined: 'shipment' });
  }
}

let runs = 0;

@Controller('errors')
@UseFilters(CardDeclinedFilter, PaymentDeclinedFilter, ShipmentDeclinedFilter)
class ErrorsController {
  /**
   * A service shared by the app's HTTP and microservice controllers throws RpcException; over
   * HTTP Nest answers it with the generic 500 (its payload stays internal). 5xx are stored so
   * that a half-failed handler is not run again.
   */
  @Post('internal')
  @Idempotent({ scope: 'public', storeErrors: ['5xx'] })
  internal() {
    runs++;
    throw new RpcException({
      sql: 'UPDATE accounts SET balance = ...',
      dsn: 'postgres://app:s3cret@db',
    });
  }

  @Post('declined')
  @Idempotent({ scope: 'public', storeErrors: [CardDeclinedError] })
  declined() {
    runs++;
    throw new CardDeclinedError('insufficient_funds');
  }

  @Post('shipment')
  @Idempotent({ scope: 'public', storeErrors: [PaymentDeclined, ShipmentDeclined] })
  shipment() {
    runs++;
    throw new ShipmentDeclined('no carrier');
  }
}

describe.each(PLATFORMS)('stored errors replayed as first answered, on %s', (platform) => {
  describe.each(STORES)('with the %s store', (storeName) => {
    const prefix = uniquePrefix('stored-errors');
    const suite = appForSuite(
      platform,
      [ErrorsController],
      () => storeOptions(storeName, prefix),
      () => cleanUpPrefix(prefix),
    );

    const twice = async (path: string) => {
      const key = randomUUID();
      const before = runs;
      const first = await post(suite.url, path, { key });
      const replay = await post(suite.url, path, { key });
      return { first, replay, ran: runs - before };
    };

    it('a replayed 500 never reveals what the first 500 hid (an error with getError())', async () => {
      const { first, replay, ran } = await twice('/errors/internal');
      expect(ran).toBe(1);
      expect(first.status).toBe(500);
      expect({ status: replay.status, body: replay.text }).toEqual({
        status: first.status,
        body: first.text,
      });
    });

    it('a replayed domain error gets the same body from its filter (fields of the error kept)', async () => {
      const { first, replay, ran } = await twice('/errors/declined');
      expect(ran).toBe(1);
      expect(first.json()).toEqual({ declined: true, code: 'insufficient_funds' });
      expect({ status: replay.status, body: replay.json() }).toEqual({
        status: 402,
        body: first.json(),
      });
    });

    it('a replayed error is rebuilt as the class that was thrown, not another of the same name', async () => {
      const { first, replay, ran } = await twice('/errors/shipment');
      expect(ran).toBe(1);
      expect(first.status).toBe(409);
      expect({ status: replay.status, body: replay.text }).toEqual({
        status: first.status,
        body: first.text,
      });
    });
  });
});
