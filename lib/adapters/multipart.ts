import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { IdempotencyKeyInvalidError } from '../errors/idempotency.errors';
import { fingerprint } from '../utils/fingerprint';

/** What this reads of an HTTP request: Express's, or Fastify's with its Node request as `raw`. */
export interface MultipartRequestLike {
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  readableEnded?: boolean;
  raw?: { readableEnded?: boolean };
  /** multer: `FileInterceptor`'s file. */
  file?: unknown;
  /** multer: `FilesInterceptor`'s and `AnyFilesInterceptor`'s list, `FileFieldsInterceptor`'s map. */
  files?: unknown;
}

/** The part of a file multer describes that a fingerprint reads. */
interface MulterFile {
  fieldname?: unknown;
  originalname?: unknown;
  mimetype?: unknown;
  /** memoryStorage(). */
  buffer?: unknown;
  /** diskStorage() (or `dest`). */
  path?: unknown;
}

/** Whether the request sends a multipart body (`multipart/form-data`, `multipart/mixed`...). */
export function isMultipart(request: MultipartRequestLike): boolean {
  const type = request.headers['content-type'];
  return typeof type === 'string' && /^\s*multipart\//i.test(type);
}

/** Whether the request has a body that nothing has read to its end yet: no parser ran on it. */
export function bodyUnread(request: MultipartRequestLike): boolean {
  const length = request.headers['content-length'];
  const hasBody =
    request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  return hasBody && (request.raw ?? request).readableEnded !== true;
}

/**
 * The fingerprint of a multipart request once multer (`FileInterceptor` and its siblings of
 * `@nestjs/platform-express`) has parsed it: its fields, and for each file its field, name, type
 * and a SHA-256 of its bytes, read from memory (memoryStorage) or streamed back from disk
 * (diskStorage), so memory stays bounded whatever the file's size. Never the raw body: clients
 * pick a new boundary for every attempt, so a retry would never be the same.
 *
 * @throws IdempotencyKeyInvalidError (400) when the body cannot be fingerprinted: nothing had
 *   parsed it when the key was claimed, another parser did (its parts are not known here), or a
 *   file is kept where its bytes cannot be read back. Such a request is never the same body.
 */
export async function multipartFingerprint(
  parts: string[],
  request: MultipartRequestLike,
): Promise<string> {
  if (bodyUnread(request)) throw unfingerprintable('no parser had read it');
  const { body } = request;
  // multer gives the body no prototype; any other parser's parts may hold files not seen here.
  if (typeof body !== 'object' || body === null || Object.getPrototypeOf(body) !== null) {
    throw unfingerprintable('it was parsed by something other than multer');
  }
  const file = request.file === undefined ? undefined : await describeFile(request.file);
  const files = await describeFiles(request.files);
  return fingerprint([...parts, 'multipart'], { fields: body, file, files });
}

/** `req.files` as multer leaves it (a list, or lists by field name), each file described. */
async function describeFiles(files: unknown): Promise<unknown> {
  if (files === undefined) return undefined;
  if (Array.isArray(files)) return describeList(files);
  const byField: Record<string, unknown> = {};
  for (const [field, list] of Object.entries(files as Record<string, unknown>)) {
    byField[field] = Array.isArray(list) ? await describeList(list) : await describeFile(list);
  }
  return byField;
}

/** One after the other: a disk-stored upload of many files opens one file at a time. */
async function describeList(list: unknown[]): Promise<unknown[]> {
  const described: unknown[] = [];
  for (const file of list) described.push(await describeFile(file));
  return described;
}

async function describeFile(value: unknown): Promise<unknown> {
  const file = (value ?? {}) as MulterFile;
  const { fieldname, originalname, mimetype, buffer, path } = file;
  let sha256: string;
  if (Buffer.isBuffer(buffer)) {
    sha256 = createHash('sha256').update(buffer).digest('base64');
  } else if (typeof path === 'string') {
    sha256 = await hashFile(path);
  } else {
    throw unfingerprintable(
      `its file ${JSON.stringify(fieldname)} is kept by a storage engine whose bytes cannot be ` +
        'read back (neither `buffer` nor `path`)',
    );
  }
  return { field: fieldname, name: originalname, type: mimetype, sha256 };
}

/** A SHA-256 of a file's bytes, streamed (64 KiB at a time). */
async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('base64');
}

function unfingerprintable(why: string): IdempotencyKeyInvalidError {
  return new IdempotencyKeyInvalidError(
    `The idempotency fingerprint could not be worked out for this multipart body: ${why}.`,
  );
}
