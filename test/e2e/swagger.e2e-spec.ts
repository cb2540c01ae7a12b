import { Controller, Get, HttpCode, INestApplication, Module, Post, Put } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ApiCreatedResponse, DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import {
  IdempotencyErrorCode,
  IdempotencyModule,
  Idempotent,
  MemoryIdempotencyStore,
} from '../../lib';
import { ApiIdempotent } from '../../lib/swagger';

@Controller('payments')
class PaymentsController {
  // @ApiIdempotent() above the route decorators and below @Idempotent(): order does not matter.
  @ApiIdempotent()
  @Post()
  @Idempotent({ required: true })
  create() {
    return { id: 1 };
  }

  @Post('refunds')
  @Idempotent()
  @ApiCreatedResponse({
    description: 'The refund',
    headers: { Location: { description: 'URL of the refund', schema: { type: 'string' } } },
  })
  @ApiIdempotent()
  refund() {
    return { id: 2 };
  }

  @Post('imports')
  @HttpCode(202)
  @Idempotent({ fingerprint: false, failOpen: true, maxKeyLength: 64 })
  @ApiIdempotent()
  accept() {
    return { accepted: true };
  }

  @Get(':id')
  find() {
    return { id: 1 };
  }
}

@ApiIdempotent({ headerName: 'X-Request-Key', problemDetails: true })
@Controller('orders')
@Idempotent({ required: true, headerName: 'X-Request-Key' })
class OrdersController {
  @Post()
  create() {
    return { order: 1 };
  }

  @Put(':id')
  replace() {
    return { order: 1 };
  }
}

@Module({
  imports: [
    IdempotencyModule.forRoot({ store: new MemoryIdempotencyStore(), problemDetails: false }),
  ],
  controllers: [PaymentsController, OrdersController],
})
class AppModule {}

type Operation = {
  parameters?: { name: string; in: string; required?: boolean; schema?: unknown }[];
  responses: Record<string, Record<string, any>>; // eslint-disable-line @typescript-eslint/no-explicit-any
};

describe('@ApiIdempotent() in the OpenAPI document of a real app', () => {
  let app: INestApplication;
  let document: OpenAPIObject;
  let url: string;
  const operation = (path: string, method: 'get' | 'post' | 'put') =>
    document.paths[path][method] as unknown as Operation;

  beforeAll(async () => {
    app = await NestFactory.create(AppModule, { logger: false });
    document = SwaggerModule.createDocument(app, new DocumentBuilder().setTitle('t').build());
    SwaggerModule.setup('docs', app, document);
    await app.listen(0, '127.0.0.1');
    url = await app.getUrl();
  });
  afterAll(() => app.close());

  it('documents a required Idempotency-Key header with its maximum length', () => {
    const header = operation('/payments', 'post').parameters?.find((p) => p.in === 'header');
    expect(header).toMatchObject({
      name: 'Idempotency-Key',
      in: 'header',
      required: true,
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    });
  });

  it('documents Idempotent-Replayed on the default success response and every error answer', () => {
    const { responses } = operation('/payments', 'post');
    expect(Object.keys(responses).sort()).toEqual(['201', '400', '409', '422', '503']);
    expect(responses['201'].headers['Idempotent-Replayed'].schema).toEqual({
      type: 'string',
      enum: ['true'],
    });
    const code = (status: string) =>
      responses[status].content['application/json'].schema.properties.code.enum;
    expect(code('400')).toEqual([IdempotencyErrorCode.KeyMissing, IdempotencyErrorCode.KeyInvalid]);
    expect(code('409')).toEqual([IdempotencyErrorCode.InProgress]);
    expect(code('422')).toEqual([IdempotencyErrorCode.KeyReused]);
    expect(code('503')).toEqual([IdempotencyErrorCode.StoreUnavailable]);
    expect(responses['409'].headers['Retry-After'].schema).toEqual({ type: 'integer', minimum: 1 });
    expect(responses['503'].headers['Retry-After']).toBeDefined();
    expect(responses['400'].headers).toBeUndefined();
    expect(responses['400'].content['application/json'].schema.required).toEqual([
      'statusCode',
      'error',
      'code',
      'message',
    ]);
  });

  it("keeps the route's own success response and adds the replay header to it", () => {
    const { parameters, responses } = operation('/payments/refunds', 'post');
    expect(parameters?.find((p) => p.in === 'header')?.required).toBe(false);
    expect(responses['201'].description).toBe('The refund');
    expect(Object.keys(responses['201'].headers).sort()).toEqual([
      'Idempotent-Replayed',
      'Location',
    ]);
    // Not required: a request without a key runs unprotected, so only invalid keys get 400.
    expect(responses['400'].content['application/json'].schema.properties.code.enum).toEqual([
      IdempotencyErrorCode.KeyInvalid,
    ]);
  });

  it("follows the route's options: @HttpCode, no 422 without fingerprint, no 503 with failOpen", () => {
    const { parameters, responses } = operation('/payments/imports', 'post');
    expect(Object.keys(responses).sort()).toEqual(['202', '400', '409']);
    expect(responses['202'].headers['Idempotent-Replayed']).toBeDefined();
    expect(parameters?.find((p) => p.in === 'header')?.schema).toMatchObject({ maxLength: 64 });
  });

  it('leaves routes without the decorator alone', () => {
    const { parameters, responses } = operation('/payments/{id}', 'get');
    expect(parameters?.some((p) => p.in === 'header')).toBe(false);
    expect(Object.keys(responses)).toEqual(['200']);
  });

  it('documents every route of a decorated controller, with problem+json bodies', () => {
    for (const [path, method, success] of [
      ['/orders', 'post', '201'],
      ['/orders/{id}', 'put', '200'],
    ] as const) {
      const { parameters, responses } = operation(path, method);
      const headers = parameters?.filter((p) => p.in === 'header') ?? [];
      expect(headers).toEqual([expect.objectContaining({ name: 'X-Request-Key', required: true })]);
      expect(responses[success].headers['Idempotent-Replayed']).toBeDefined();
      const problem = responses['409'].content['application/problem+json'].schema;
      expect(problem.required).toEqual(['type', 'title', 'status', 'detail', 'code']);
      expect(problem.properties.status.enum).toEqual([409]);
      expect(problem.properties.code.enum).toEqual([IdempotencyErrorCode.InProgress]);
    }
  });

  it('serves the document, and the app answers with the documented codes', async () => {
    const served = (await (await fetch(`${url}/docs-json`)).json()) as OpenAPIObject;
    expect(served.paths['/payments'].post?.parameters).toEqual(
      document.paths['/payments'].post?.parameters,
    );

    const missing = await fetch(`${url}/payments`, { method: 'POST' });
    expect(missing.status).toBe(400);
    const { responses } = operation('/payments', 'post');
    const documented = responses['400'].content['application/json'].schema.properties.code.enum;
    expect(documented).toContain(((await missing.json()) as { code: string }).code);
  });
});
