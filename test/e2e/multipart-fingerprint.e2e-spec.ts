import {
  Body,
  type CallHandler,
  Controller,
  type ExecutionContext,
  Injectable,
  Module,
  type NestInterceptor,
  Post,
  Req,
  UploadedFile,
  UploadedFiles,
  UseInterceptors,
} from '@nestjs/common';
import {
  FileFieldsInterceptor,
  FileInterceptor,
  type NestExpressApplication,
} from '@nestjs/platform-express';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Observable } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib';
import { appForSuite, listen, type SuiteApp } from '../support/http-app';

/**
 * The fingerprint covers what the client sent in a multipart body: its fields and its files.
 * `FileInterceptor` (multer) parses the body; the claim used to be taken before it ran, so every
 * upload to a route fingerprinted the same and another file under the same key replayed the
 * first response. A multipart body no parser has read when the key is claimed cannot be
 * fingerprinted: such a request is refused, never taken for the same body.
 */

/** Handler runs per route. */
const runs = new Map<string, number>();
const run = (route: string) => {
  const n = (runs.get(route) ?? 0) + 1;
  runs.set(route, n);
  return n;
};

interface UploadedPart {
  originalname: string;
  size: number;
}

const describeUpload = (route: string, file: UploadedPart | undefined, fields: object) => ({
  run: run(route),
  file: file && { name: file.originalname, size: file.size },
  fields: { ...fields },
});

const uploads = mkdtempSync(join(tmpdir(), 'multipart-fingerprint-'));

@Controller('uploads')
class UploadsController {
  @Post('memory')
  @Idempotent()
  @UseInterceptors(FileInterceptor('file'))
  memory(@UploadedFile() file: UploadedPart | undefined, @Body() fields: object) {
    return describeUpload('memory', file, fields);
  }

  // Decorators the other way round: @Idempotent() below FileInterceptor, files on disk.
  @Post('disk')
  @UseInterceptors(FileInterceptor('file', { dest: uploads }))
  @Idempotent()
  disk(@UploadedFile() file: UploadedPart | undefined, @Body() fields: object) {
    return describeUpload('disk', file, fields);
  }

  @Post('fields')
  @Idempotent()
  @UseInterceptors(FileFieldsInterceptor([{ name: 'front' }, { name: 'back' }]))
  fields(@UploadedFiles() files: Record<string, UploadedPart[]>, @Body() fields: object) {
    const names = Object.entries(files).map(([field, [file]]) => `${field}=${file.originalname}`);
    return { run: run('fields'), files: names.sort(), fields: { ...fields } };
  }

  // Reads the body itself: nothing has parsed it when the key is claimed.
  @Post('stream')
  @Idempotent()
  async stream(@Req() request: AsyncIterable<Buffer>) {
    let bytes = 0;
    for await (const chunk of request) bytes += chunk.length;
    return { run: run('stream'), bytes };
  }
}

@Injectable()
class StampInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle();
  }
}

// @Idempotent() on the class, which has an interceptor of its own: it is bound on the class.
@Controller('albums')
@Idempotent()
@UseInterceptors(StampInterceptor)
class AlbumsController {
  @Post()
  @UseInterceptors(FileInterceptor('file'))
  add(@UploadedFile() file: UploadedPart | undefined, @Body() fields: object) {
    return describeUpload('albums', file, fields);
  }
}

interface Part {
  field?: string;
  name: string;
  content: string;
}

/** POSTs a multipart form (fetch picks a new boundary every time, as clients do). */
async function upload(
  url: string,
  path: string,
  form: { key?: string; fields?: Record<string, string>; files?: Part[] },
): Promise<{ status: number; body: Record<string, unknown>; replayed: boolean }> {
  const data = new FormData();
  for (const [name, value] of Object.entries(form.fields ?? {})) data.append(name, value);
  for (const part of form.files ?? []) {
    data.append(part.field ?? 'file', new Blob([part.content], { type: 'text/plain' }), part.name);
  }
  const headers: Record<string, string> = form.key ? { 'Idempotency-Key': form.key } : {};
  const response = await fetch(`${url}${path}`, { method: 'POST', headers, body: data });
  const text = await response.text();
  return {
    status: response.status,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
    replayed: response.headers.get('idempotent-replayed') === 'true',
  };
}

const cat = { name: 'cat.txt', content: 'a cat' };
const bat = { name: 'cat.txt', content: 'a bat' }; // same name and size, other bytes
const dog = { name: 'dog.txt', content: 'a cat' }; // same bytes, other name

afterAll(() => rmSync(uploads, { recursive: true, force: true }));

describe('multipart bodies parsed by multer (Express)', () => {
  const suite: SuiteApp = appForSuite('express', [UploadsController, AlbumsController], () => ({}));

  describe.each([
    ['FileInterceptor, memory storage', '/uploads/memory', 'memory'],
    ['FileInterceptor, disk storage, decorators reversed', '/uploads/disk', 'disk'],
    ['@Idempotent() on a controller with interceptors of its own', '/albums', 'albums'],
  ])('%s', (_name, path, route) => {
    const first = { fields: { title: 'Tom' }, files: [cat] };

    it('replays the same fields and file under the same key', async () => {
      const key = randomUUID();
      const answers = [await upload(suite.url, path, { key, ...first })];
      answers.push(await upload(suite.url, path, { key, ...first }));
      expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
      expect(answers[1].replayed).toBe(true);
      expect(answers[1].body).toEqual(answers[0].body);
      expect(answers[0].body).toMatchObject({ file: { name: 'cat.txt', size: 5 } });
    });

    it.each([
      ['another field value', { fields: { title: 'Jerry' }, files: [cat] }],
      ['another field', { fields: { title: 'Tom', colour: 'grey' }, files: [cat] }],
      ['another file with the same name and size', { fields: { title: 'Tom' }, files: [bat] }],
      ['the same bytes under another file name', { fields: { title: 'Tom' }, files: [dog] }],
      ['no file', { fields: { title: 'Tom' } }],
    ])('answers 422 to %s under the same key, without running the handler', async (_c, other) => {
      const key = randomUUID();
      expect((await upload(suite.url, path, { key, ...first })).status).toBe(201);
      const ran = runs.get(route);
      const answer = await upload(suite.url, path, { key, ...other });
      expect(answer.status).toBe(422);
      expect(answer.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
      expect(runs.get(route)).toBe(ran);
    });
  });

  it('tells apart files swapped between the fields of FileFieldsInterceptor', async () => {
    const key = randomUUID();
    const files = [
      { field: 'front', ...cat },
      { field: 'back', ...dog },
    ];
    const swapped = [
      { field: 'front', ...dog },
      { field: 'back', ...cat },
    ];
    const first = await upload(suite.url, '/uploads/fields', { key, files });
    const again = await upload(suite.url, '/uploads/fields', { key, files });
    expect([first.status, again.status, again.replayed]).toEqual([201, 201, true]);
    const ran = runs.get('fields');
    const other = await upload(suite.url, '/uploads/fields', { key, files: swapped });
    expect(other.status).toBe(422);
    expect(runs.get('fields')).toBe(ran);
  });

  it('refuses (400) a multipart type multer leaves unread, rather than run it unclaimed', async () => {
    // type-is (multer's check) takes `multipart/` for no multipart type: multer reads nothing.
    const key = randomUUID();
    const before = runs.get('memory');
    for (const body of ['one', 'two']) {
      const response = await fetch(`${suite.url}/uploads/memory`, {
        method: 'POST',
        headers: { 'Idempotency-Key': key, 'Content-Type': 'multipart/' },
        body,
      });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { code: string }).code).toBe('IDEMPOTENCY_KEY_INVALID');
    }
    expect(runs.get('memory')).toBe(before);
  });

  it('refuses (400) a keyed multipart body no parser read before the claim, every time', async () => {
    const key = randomUUID();
    const before = runs.get('stream');
    for (const files of [[cat], [bat]]) {
      const answer = await upload(suite.url, '/uploads/stream', { key, files });
      expect(answer.status).toBe(400);
      expect(answer.body.code).toBe('IDEMPOTENCY_KEY_INVALID');
    }
    expect(runs.get('stream')).toBe(before);
    // Without a key there is nothing to fingerprint: the handler reads the body itself.
    const unkeyed = await upload(suite.url, '/uploads/stream', { files: [cat] });
    expect(unkeyed.status).toBe(201);
  });
});

describe('multipart bodies with globalInterceptor: true (Express)', () => {
  let app: NestExpressApplication | undefined;
  let url = '';
  beforeAll(async () => {
    @Module({
      imports: [IdempotencyModule.forRoot({ globalInterceptor: true })],
      controllers: [UploadsController, AlbumsController],
    })
    class GlobalModule {}
    ({ app, url } = (await listen('express', GlobalModule)) as {
      app: NestExpressApplication;
      url: string;
    });
  });
  afterAll(() => app?.close());

  it.each(['/uploads/memory', '/albums'])(
    'claims %s once the body is parsed: a replay, then 422 to another file',
    async (path) => {
      const key = randomUUID();
      const first = { fields: { title: 'Tom' }, files: [cat] };
      const answers = [
        await upload(url, path, { key, ...first }),
        await upload(url, path, { key, ...first }),
        await upload(url, path, { key, fields: { title: 'Tom' }, files: [bat] }),
      ];
      expect(answers.map((answer) => [answer.status, answer.replayed])).toEqual([
        [201, false],
        [201, true],
        [422, false],
      ]);
    },
  );
});

@Controller('forms')
class FormsController {
  @Post()
  @Idempotent()
  create(@Body() body: unknown) {
    return { run: run('forms'), body: body ?? null };
  }
}

describe('multipart bodies on Fastify (no multipart parser installed)', () => {
  const suite: SuiteApp = appForSuite('fastify', [FormsController], () => ({}));

  it('answers 415 to the same key with two other files, never a replay', async () => {
    const key = randomUUID();
    const answers = [
      await upload(suite.url, '/forms', { key, fields: { title: 'Tom' }, files: [cat] }),
      await upload(suite.url, '/forms', { key, fields: { title: 'Tom' }, files: [bat] }),
    ];
    expect(answers.map((answer) => [answer.status, answer.replayed])).toEqual([
      [415, false],
      [415, false],
    ]);
    expect(runs.get('forms')).toBeUndefined();
  });
});

describe('multipart bodies on Fastify left unread by a content-type parser', () => {
  let app: NestFastifyApplication | undefined;
  let url = '';
  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot()], controllers: [FormsController] })
    class FormsModule {}
    ({ app, url } = (await listen('fastify', FormsModule, (nest) => {
      // What a streaming multipart plugin leaves: the body for the handler to read.
      const fastify = (nest as NestFastifyApplication).getHttpAdapter().getInstance();
      fastify.addContentTypeParser('multipart/form-data', (_request, _payload, done) => {
        done(null, undefined);
      });
    })) as { app: NestFastifyApplication; url: string });
  });
  afterAll(() => app?.close());

  it('refuses (400) the same key with two other files, never a replay', async () => {
    const key = randomUUID();
    for (const files of [[cat], [bat]]) {
      const answer = await upload(url, '/forms', { key, fields: { title: 'Tom' }, files });
      expect([answer.status, answer.body.code]).toEqual([400, 'IDEMPOTENCY_KEY_INVALID']);
    }
    expect(runs.get('forms')).toBeUndefined();
  });
});
