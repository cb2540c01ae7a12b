import { PrismaPg } from '@prisma/adapter-pg';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The part of a generated PrismaClient (and of its transaction client) the tests use. */
export interface PrismaLike {
  $connect(): Promise<void>;
  $disconnect(): Promise<void>;
  $queryRawUnsafe<T>(sql: string, ...values: unknown[]): Promise<T>;
}

let generated = false;

/** The file's text, or undefined when it does not exist. */
function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Whether node_modules/.prisma/client already holds the client of this schema from the installed
 * `prisma`: generating takes seconds, and every suite and lane would otherwise redo it. An install
 * wipes the folder (or leaves `@prisma/client`'s stub, without this schema), so it is regenerated.
 */
function generatedAlready(root: string, schema: string): boolean {
  const client = join(root, 'node_modules', '.prisma', 'client');
  const version = (
    JSON.parse(read(join(root, 'node_modules', 'prisma', 'package.json')) ?? '{}') as {
      version?: string;
    }
  ).version;
  return (
    read(join(client, 'schema.prisma')) === read(schema) &&
    version !== undefined &&
    (read(join(client, 'index.js'))?.includes(`"clientVersion": "${version}"`) ?? false)
  );
}

/**
 * A Prisma 7 client (engine-free: queries go through `@prisma/adapter-pg`) on `url`, generated
 * from test/support/prisma/schema.prisma on first use unless it is there already (`prisma
 * generate`, about 5 s; it writes node_modules/.prisma/client, so it is required here rather than
 * imported).
 *
 * `prisma generate` fetches the schema engine binary from Prisma's download host when it is
 * missing, though generating a client never runs it; that host is unreachable from this
 * project's machines (the npm registry is all they reach), so PRISMA_SCHEMA_ENGINE_BINARY names a
 * file that exists instead. Nothing else of Prisma needs a download for these tests.
 */
export function prismaClient(url: string): PrismaLike {
  const root = join(__dirname, '..', '..');
  const schema = join(__dirname, 'prisma', 'schema.prisma');
  if (!generated && !generatedAlready(root, schema)) {
    execFileSync(
      process.execPath,
      [join(root, 'node_modules', 'prisma', 'build', 'index.js'), 'generate', '--schema', schema],
      {
        cwd: root,
        stdio: 'pipe',
        env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.execPath },
      },
    );
  }
  generated = true;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { PrismaClient } = require('@prisma/client') as {
    PrismaClient: new (options: { adapter: PrismaPg }) => PrismaLike;
  };
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
}
