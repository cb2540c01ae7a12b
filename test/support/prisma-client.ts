import { PrismaPg } from '@prisma/adapter-pg';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/** The part of a generated PrismaClient (and of its transaction client) the tests use. */
export interface PrismaLike {
  $connect(): Promise<void>;
  $disconnect(): Promise<void>;
  $queryRawUnsafe<T>(sql: string, ...values: unknown[]): Promise<T>;
}

let generated = false;

/**
 * A Prisma 7 client (engine-free: queries go through `@prisma/adapter-pg`) on `url`, generated
 * from test/support/prisma/schema.prisma on first use (`prisma generate`, about 5 s; it writes
 * node_modules/.prisma/client, so it is required here rather than imported).
 *
 * `prisma generate` fetches the schema engine binary from Prisma's download host when it is
 * missing, though generating a client never runs it; that host is unreachable from this
 * project's machines (the npm registry is all they reach), so PRISMA_SCHEMA_ENGINE_BINARY names a
 * file that exists instead. Nothing else of Prisma needs a download for these tests.
 */
export function prismaClient(url: string): PrismaLike {
  const root = join(__dirname, '..', '..');
  if (!generated) {
    execFileSync(
      process.execPath,
      [
        join(root, 'node_modules', 'prisma', 'build', 'index.js'),
        'generate',
        '--schema',
        join(__dirname, 'prisma', 'schema.prisma'),
      ],
      {
        cwd: root,
        stdio: 'pipe',
        env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.execPath },
      },
    );
    generated = true;
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { PrismaClient } = require('@prisma/client') as {
    PrismaClient: new (options: { adapter: PrismaPg }) => PrismaLike;
  };
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
}
