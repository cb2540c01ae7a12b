import {
  Body,
  Controller,
  Get,
  Injectable,
  type INestApplication,
  type LoggerService,
  Module,
  Post,
} from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib';
import { appUrl } from '../support/http-app';
import { PLATFORMS, type Platform, post } from '../support/test-app';

/**
 * A controller's own tests build it without IdempotencyModule, as Nest's samples do
 * (`Test.createTestingModule({ controllers: [CatsController] })`, or the feature module alone).
 * `@Idempotent()` on a route must not break them: a request without a key reaches the handler.
 * An app that forgot the module still hears about it: a warning at boot, and a request carrying
 * a key is refused (500, naming IdempotencyModule), never run unprotected.
 */

interface Cat {
  name: string;
}

@Injectable()
class CatsService {
  readonly cats: Cat[] = [];

  create(cat: Cat): Cat {
    this.cats.push(cat);
    return cat;
  }
}

@Controller('cats')
class CatsController {
  constructor(private readonly catsService: CatsService) {}

  @Post()
  @Idempotent()
  create(@Body() cat: Cat) {
    return this.catsService.create(cat);
  }

  @Get()
  findAll(): Cat[] {
    return this.catsService.cats;
  }
}

@Module({ controllers: [CatsController], providers: [CatsService] })
class CatsModule {}

/** A logger that keeps what is logged at warn and error level. */
class KeptLogs implements LoggerService {
  readonly warnings: string[] = [];
  readonly errors: string[] = [];
  log(): void {}
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
  error(message: unknown): void {
    this.errors.push(String(message));
  }
}

describe('a controller unit test without IdempotencyModule', () => {
  it('builds the controller and calls its @Idempotent() handler', async () => {
    const moduleRef = await Test.createTestingModule({
      controllers: [CatsController],
      providers: [CatsService],
    }).compile();
    const controller = moduleRef.get(CatsController);
    expect(controller.create({ name: 'Tom' })).toEqual({ name: 'Tom' });
    expect(controller.findAll()).toEqual([{ name: 'Tom' }]);
    await moduleRef.close();
  });
});

/** The testing module's app on `platform`, listening on a free port, with its logs kept. */
async function start(
  platform: Platform,
  metadata: Parameters<typeof Test.createTestingModule>[0],
): Promise<{ app: INestApplication; url: string; logs: KeptLogs; cats: CatsService }> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const app =
    platform === 'fastify'
      ? moduleRef.createNestApplication(new FastifyAdapter())
      : moduleRef.createNestApplication();
  const logs = new KeptLogs();
  app.useLogger(logs);
  await app.listen(0, '127.0.0.1');
  return { app, url: await appUrl(app), logs, cats: app.get(CatsService) };
}

const WITHOUT_MODULE = {
  'the controller alone': { controllers: [CatsController], providers: [CatsService] },
  'the feature module alone': { imports: [CatsModule] },
};

describe.each(PLATFORMS)('@Idempotent() routes without IdempotencyModule on %s', (platform) => {
  describe.each(Object.entries(WITHOUT_MODULE))('%s', (_name, metadata) => {
    let suite: Awaited<ReturnType<typeof start>>;
    beforeAll(async () => {
      suite = await start(platform, metadata);
    });
    afterAll(() => suite?.app.close());

    it('warns once at boot, naming the module and the route', () => {
      const warnings = suite.logs.warnings.filter((line) => line.includes('IdempotencyModule'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('CatsController.create');
    });

    it('serves a request without a key', async () => {
      const answer = await post(suite.url, '/cats', { body: { name: 'Tom' } });
      expect(answer.status).toBe(201);
      expect(answer.json()).toEqual({ name: 'Tom' });
      expect(suite.cats.cats).toContainEqual({ name: 'Tom' });
    });

    it('refuses a request with a key (500 naming the module), without running it', async () => {
      const before = suite.cats.cats.length;
      const key = randomUUID();
      for (let attempt = 0; attempt < 2; attempt++) {
        const answer = await post(suite.url, '/cats', { key, body: { name: 'Felix' } });
        expect(answer.status).toBe(500);
        expect(answer.text).toContain('IdempotencyModule is not imported');
      }
      expect(suite.cats.cats.length).toBe(before);
      // Logged once, for the operator, however many requests are refused.
      const errors = suite.logs.errors.filter((line) => line.includes('IdempotencyModule'));
      expect(errors).toHaveLength(1);
      expect(errors[0]).toContain('CatsController.create');
    });
  });

  describe('with IdempotencyModule.forRoot() (the in-memory store)', () => {
    let suite: Awaited<ReturnType<typeof start>>;
    beforeAll(async () => {
      suite = await start(platform, { imports: [IdempotencyModule.forRoot(), CatsModule] });
    });
    afterAll(() => suite?.app.close());

    it('runs a keyed request once and replays it', async () => {
      const key = randomUUID();
      const first = await post(suite.url, '/cats', { key, body: { name: 'Garfield' } });
      const again = await post(suite.url, '/cats', { key, body: { name: 'Garfield' } });
      expect([first.status, again.status]).toEqual([201, 201]);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(suite.cats.cats.filter((cat) => cat.name === 'Garfield')).toHaveLength(1);
      expect(suite.logs.warnings.filter((line) => line.includes('not imported'))).toEqual([]);
    });
  });
});
