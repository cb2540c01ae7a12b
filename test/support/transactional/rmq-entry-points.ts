import { TransactionHost } from '@nestjs-cls/transactional';
import {
  type CallHandler,
  Controller,
  type ExecutionContext,
  type INestMicroservice,
  Injectable,
  Module,
  type NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  type ClientProxy,
  ClientProxyFactory,
  EventPattern,
  MessagePattern,
  Payload,
  type RmqContext,
  RpcException,
} from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom, lastValueFrom, type Observable, tap } from 'rxjs';
import { Idempotent, type IdempotencyEvent } from '../../../lib';
import {
  requireTransport,
  transportSetup,
  type TransportSetup,
  withHeaders,
  withKey,
} from '../microservice-app';
import { DECLINED, declinedAs, type EntryPoint, Ledger } from './harness';

/** What {@link EntryPoint.start} is given to build the app's imports. */
type EntryPointImports = Parameters<EntryPoint['start']>[0];

/** The patterns of the RabbitMQ consumers, per test run. */
const PAY = `payments.pay.tx.${randomUUID().slice(0, 8)}`;
const PAID = `payments.paid.tx.${randomUUID().slice(0, 8)}`;

/** The header that names an emitted event's caller: events have no reply to carry the outcome. */
const CALL = 'x-call';

/** Callers waiting for the handling of the event they emitted to end, by {@link CALL}. */
const waiting = new Map<string, () => void>();

/**
 * Tells the caller of an event when the handler's run ended (returned or threw): the outcome is
 * then in the module's events.
 */
@Injectable()
class HandlingEnded implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const message = context.switchToRpc().getContext<RmqContext>().getMessage() as {
      properties: { headers?: Record<string, string> };
    };
    const ended = () => waiting.get(message.properties.headers?.[CALL] ?? '')?.();
    return next.handle().pipe(tap({ complete: ended, error: ended }));
  }
}

/** The events that end a claim: what an event's caller is told. */
const OUTCOMES = ['completed', 'replayed', 'released', 'fenced'];

@Controller()
@UseInterceptors(HandlingEnded)
class PaymentsRmqConsumer {
  constructor(
    private readonly ledger: Ledger,
    private readonly txHost: TransactionHost,
  ) {}

  @MessagePattern(PAY)
  @Idempotent({ transactional: true })
  async pay(@Payload() command: { item: string }): Promise<{ id: number }> {
    try {
      return { id: await this.ledger.pay(this.txHost.tx, command.item) };
    } catch (error) {
      throw declinedAs(error, (message) => new RpcException({ status: 'error', message }));
    }
  }

  @EventPattern(PAID)
  @Idempotent({ transactional: true })
  async paid(@Payload() event: { item: string }): Promise<void> {
    try {
      await this.ledger.pay(this.txHost.tx, event.item);
    } catch (error) {
      throw declinedAs(error, (message) => new RpcException(message));
    }
  }
}

/** Boots the consumers on a queue of their own, with a client for it. */
async function startConsumers(
  imports: EntryPointImports,
  ledger: Ledger,
): Promise<{ setup: TransportSetup; app: INestMicroservice; client: ClientProxy }> {
  await requireTransport('rmq');
  @Module({
    imports: imports(true),
    controllers: [PaymentsRmqConsumer],
    providers: [{ provide: Ledger, useValue: ledger }],
  })
  class RmqModule {}
  const setup = await transportSetup('rmq', undefined, `idempotency-tx-${randomUUID()}`);
  const app = await NestFactory.createMicroservice(RmqModule, {
    transport: setup.transport,
    options: setup.options,
    logger: false,
  } as never);
  await app.listen();
  const client = ClientProxyFactory.create({
    transport: setup.transport,
    options: setup.options,
  } as never) as unknown as ClientProxy;
  await client.connect();
  return { setup, app, client };
}

/** A `@MessagePattern` consumer on RabbitMQ: the reply is the answer. */
export const rmqMessageConsumer: EntryPoint = {
  name: 'RabbitMQ @MessagePattern consumer',
  declined: DECLINED,
  fenced: /./,
  async start(imports, ledger) {
    const { setup, app, client } = await startConsumers(imports, ledger);
    return {
      app,
      async call(key, item) {
        try {
          const value = await firstValueFrom(client.send(PAY, withKey(setup, { item }, key)));
          return { ok: true, value, text: JSON.stringify(value) };
        } catch (error) {
          return { ok: false, value: error, text: (error as { message: string }).message };
        }
      },
      async close() {
        await client.close();
        await app.close();
      },
    };
  },
};

/** An `@EventPattern` consumer on RabbitMQ: how its handling ended is the answer. */
export const rmqEventConsumer: EntryPoint = {
  name: 'RabbitMQ @EventPattern consumer',
  declined: `released: ${DECLINED}`,
  fenced: 'fenced',
  async start(imports, ledger) {
    const { setup, app, client } = await startConsumers(imports, ledger);
    const taken = new Set<IdempotencyEvent>();
    return {
      app,
      async call(key, item) {
        const id = randomUUID();
        const from = ledger.events.length;
        const ended = new Promise<void>((resolve) => waiting.set(id, resolve));
        const record = withHeaders(setup, { item }, { 'Idempotency-Key': key, [CALL]: id });
        await lastValueFrom(client.emit(PAID, record), { defaultValue: undefined });
        // The module replays a handled event without running the handler (nor the interceptors
        // inside its own): then the `replayed` event is the only word.
        const stop = new AbortController();
        const replayed = ledger.next(
          from,
          (event) => event.type === 'replayed' && !taken.has(event),
          { signal: stop.signal },
        );
        await Promise.race([ended, replayed.catch(() => undefined)]);
        stop.abort();
        waiting.delete(id);
        // The first outcome since the emit that no earlier call took: a call held open (the fenced
        // case) ends after the call that took its key over, and takes the outcome after that one.
        const outcome = await ledger.next(
          from,
          (event) => OUTCOMES.includes(event.type) && !taken.has(event),
        );
        taken.add(outcome);
        const ok = outcome.type === 'completed' || outcome.type === 'replayed';
        const reason = (outcome.error as { message?: string } | undefined)?.message;
        return ok
          ? { ok, value: undefined, text: 'handled' }
          : { ok, value: outcome, text: reason ? `${outcome.type}: ${reason}` : outcome.type };
      },
      async close() {
        await client.close();
        await app.close();
      },
    };
  },
};
