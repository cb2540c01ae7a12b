import {
  type CanActivate,
  Controller,
  type ExecutionContext,
  Injectable,
  Module,
  UseGuards,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  GrpcMethod,
  GrpcStreamMethod,
  type MicroserviceOptions,
  RpcException,
  Transport,
} from '@nestjs/microservices';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Observable, of } from 'rxjs';
import {
  Idempotent,
  IdempotencyModule,
  type IdempotencyModuleOptions,
  keyFromArgument,
} from '../../lib';
import { findFreePort } from './redis-server';
import { Executions } from './test-app';

/** The service definition, written to a file for the loaders (ESM tests have no __dirname). */
const ORDERS_PROTO_TEXT = `syntax = "proto3";

package orders;

service Orders {
  rpc Create (CreateOrder) returns (Order);
  rpc CreateSlow (CreateOrder) returns (Order);
  rpc CreateWaiting (CreateOrder) returns (Order);
  rpc CreateFlaky (CreateOrder) returns (Order);
  rpc CreateOutOfStock (CreateOrder) returns (Order);
  rpc CreateRequired (CreateOrder) returns (Order);
  rpc CreateFromMessage (CreateOrder) returns (Order);
  rpc Watch (CreateOrder) returns (stream Order);
}

message CreateOrder {
  string item = 1;
  string request_id = 2;
}

message Order {
  string id = 1;
  string item = 2;
  int32 run = 3;
  bytes receipt = 4;
  string owner = 5;
}
`;
export const ORDERS_PROTO = join(mkdtempSync(join(tmpdir(), 'grpc-orders-')), 'orders.proto');
writeFileSync(ORDERS_PROTO, ORDERS_PROTO_TEXT);

/** What the service sends back: `receipt` is a bytes field (a Buffer on both sides). */
export interface GrpcOrder {
  id: string;
  item: string;
  run: number;
  receipt: Buffer;
  owner: string;
}

/** A business error the `storeErrors` method stores and replays: NOT_FOUND (5). */
export class OutOfStockRpcError extends RpcException {
  constructor(item: string) {
    super({ code: grpc.status.NOT_FOUND, message: `${item} is out of stock` });
  }
}

/** Puts the caller named by the `x-user` metadata on the call, as an auth guard would. */
@Injectable()
class CallerGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const metadata = context.getArgByIndex<grpc.Metadata>(1);
    const call = context.getArgByIndex<{ user?: unknown }>(2);
    const [user] = metadata.get('x-user');
    if (user !== undefined) call.user = { id: String(user) };
    return true;
  }
}

let orderSeq = 0;

@Controller()
@UseGuards(CallerGuard)
class OrdersController {
  constructor(private readonly executions: Executions) {}

  private order(name: string, request: { item: string }, owner?: string): GrpcOrder {
    const run = this.executions.hit(name);
    const id = `order-${++orderSeq}`;
    return {
      id,
      item: request.item,
      run,
      receipt: Buffer.from([0, 255, orderSeq]),
      owner: owner ?? '',
    };
  }

  @GrpcMethod('Orders', 'Create')
  @Idempotent()
  create(request: { item: string }, _metadata: grpc.Metadata, call: { user?: { id: string } }) {
    return this.order('Create', request, call.user?.id);
  }

  @GrpcMethod('Orders', 'CreateSlow')
  @Idempotent()
  async createSlow(request: { item: string }) {
    await this.executions.hold();
    return this.order('CreateSlow', request);
  }

  @GrpcMethod('Orders', 'CreateWaiting')
  @Idempotent({ onConflict: 'wait', waitTimeout: 10_000 })
  async createWaiting(request: { item: string }) {
    await this.executions.hold();
    return this.order('CreateWaiting', request);
  }

  /** Fails on its first run only, with an error nothing stores: the key must be released. */
  @GrpcMethod('Orders', 'CreateFlaky')
  @Idempotent()
  createFlaky(request: { item: string }) {
    if (this.executions.count('CreateFlaky:failed') === 0) {
      this.executions.hit('CreateFlaky:failed');
      throw new RpcException({ code: grpc.status.INTERNAL, message: 'provider timed out' });
    }
    return this.order('CreateFlaky', request);
  }

  @GrpcMethod('Orders', 'CreateOutOfStock')
  @Idempotent({ storeErrors: [OutOfStockRpcError] })
  createOutOfStock(request: { item: string }): Observable<GrpcOrder> {
    this.executions.hit('CreateOutOfStock');
    throw new OutOfStockRpcError(request.item);
  }

  @GrpcMethod('Orders', 'CreateRequired')
  @Idempotent({ required: true })
  createRequired(request: { item: string }) {
    return of(this.order('CreateRequired', request));
  }

  @GrpcMethod('Orders', 'CreateFromMessage')
  @Idempotent({ key: keyFromArgument('request_id'), required: true })
  createFromMessage(request: { item: string }) {
    return this.order('CreateFromMessage', request);
  }
}

/** A streaming method marked `@Idempotent()`: refused at boot. */
@Controller()
export class StreamingController {
  @GrpcStreamMethod('Orders', 'Watch')
  @Idempotent()
  watch(): Observable<GrpcOrder> {
    return of();
  }
}

/** The generated client's unary calls, promisified. */
export type GrpcCall = (
  method: string,
  request: { item: string; request_id?: string },
  options?: { key?: string; user?: string },
) => Promise<GrpcOrder>;

export interface GrpcApp {
  executions: Executions;
  call: GrpcCall;
  close(): Promise<void>;
}

/** Starts a Nest gRPC microservice on a free port and a `@grpc/grpc-js` client for it. */
export async function startGrpcApp(
  options: IdempotencyModuleOptions,
  controllers: (new (...args: never[]) => object)[] = [OrdersController],
): Promise<GrpcApp> {
  const executions = new Executions();

  @Module({
    imports: [
      IdempotencyModule.forRoot({ ...options, onEvent: (event) => executions.record(event) }),
    ],
    controllers,
    providers: [{ provide: Executions, useValue: executions }],
  })
  class GrpcAppModule {}

  const url = `127.0.0.1:${await findFreePort()}`;
  const app = await NestFactory.createMicroservice<MicroserviceOptions>(GrpcAppModule, {
    transport: Transport.GRPC,
    options: { package: 'orders', protoPath: ORDERS_PROTO, url, loader: { keepCase: true } },
    logger: false,
  });
  await app.listen();

  const definition = protoLoader.loadSync(ORDERS_PROTO, { keepCase: true });
  const orders = grpc.loadPackageDefinition(definition).orders as unknown as {
    Orders: new (
      address: string,
      credentials: grpc.ChannelCredentials,
    ) => grpc.Client &
      Record<string, grpc.requestCallback<GrpcOrder> & ((...args: unknown[]) => unknown)>;
  };
  const client = new orders.Orders(url, grpc.credentials.createInsecure());
  const call: GrpcCall = (method, request, { key, user } = {}) => {
    const metadata = new grpc.Metadata();
    if (key !== undefined) metadata.set('idempotency-key', key);
    if (user !== undefined) metadata.set('x-user', user);
    return new Promise((resolve, reject) => {
      const rpc = client[method] as (
        request: unknown,
        metadata: grpc.Metadata,
        callback: (error: grpc.ServiceError | null, response: GrpcOrder) => void,
      ) => void;
      rpc.call(client, request, metadata, (error, response) =>
        error ? reject(error) : resolve(response),
      );
    });
  };
  return {
    executions,
    call,
    async close() {
      client.close();
      await app.close();
    },
  };
}
