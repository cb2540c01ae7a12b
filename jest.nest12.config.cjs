// The e2e suite against NestJS 12 (ESM-only, compat/nest12) and the library's ESM build, built by
// `npm run test:nest12` into compat/nest12/dist (a private copy: a concurrent `npm run build`
// cannot empty it under a running suite). Node runs with --experimental-vm-modules, which Jest 29
// needs to load ES modules; the tests themselves are compiled to ESM by ts-jest (useESM).
const { existsSync, readFileSync } = require('node:fs');
const { join } = require('node:path');

// Without compat/nest12/node_modules the resolver would quietly fall back to the root's Nest 11.
const nestCore = join(
  __dirname,
  'compat',
  'nest12',
  'node_modules',
  '@nestjs',
  'core',
  'package.json',
);
const nestVersion = existsSync(nestCore) ? JSON.parse(readFileSync(nestCore, 'utf8')).version : '';
if (!nestVersion.startsWith('12.')) {
  throw new Error('NestJS 12 is not installed in compat/nest12: run `npm run compat:install`');
}

/** @type {import('jest').Config} */
module.exports = {
  rootDir: '.',
  testEnvironment: 'node',
  roots: ['<rootDir>/test/e2e', '<rootDir>/sample-app'],
  testRegex: '.*\\.(spec|e2e-spec)\\.ts$',
  // The transactional suites need @nestjs-cls/transactional, a CommonJS package that requires
  // @nestjs/common: Nest 12's is ESM-only, which Node loads through require(esm) but Jest's VM
  // cannot. They run on NestJS 11 here; test/packaging/nest12-transactional.e2e-spec.ts runs the
  // transactional path on NestJS 12 in a process of its own, outside Jest's VM.
  testPathIgnorePatterns: [
    '/test/e2e/(resumable-)?transactional(-failures)?\\.e2e-spec\\.ts$',
    // @ssut/nestjs-sqs (sqs-consumer) has no NestJS 12 release (its peer range ends at 11), so
    // the SQS consumers run on NestJS 11 only; @IdempotentSqsMessage() itself needs no Nest
    // package beyond @nestjs/common's Inject.
    '/test/e2e/sqs-consumers\\.e2e-spec\\.ts$',
    // @golevelup/nestjs-rabbitmq 9 has no NestJS 12 release (it require()s @nestjs/common, which
    // Jest's VM cannot load as Nest 12's ES module): its handlers run on NestJS 11 only. The
    // WebSocket gateways (@nestjs/websockets 12) run here.
    '/test/e2e/(golevelup-rabbitmq|rabbit-handlers-in-controllers)\\.e2e-spec\\.ts$',
  ],
  extensionsToTreatAsEsm: ['.ts'],
  // Transpile only (isolatedModules in compat/nest12/tsconfig.json), as in jest.shared.js: `npm
  // test` type-checks the tests once with `npm run typecheck`.
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/compat/nest12/tsconfig.json' }],
  },
  // The library as an ESM app gets it: the ESM build (relative imports of lib/: resolver.cjs).
  moduleNameMapper: {
    '^nestjs-idempotency$': '<rootDir>/compat/nest12/dist/index.js',
    '^nestjs-idempotency/testing$': '<rootDir>/compat/nest12/dist/testing/index.js',
    // ESM-only under mercurius (see the file), which @fastify/static require()s.
    '^content-disposition$': '<rootDir>/test/support/content-disposition.cjs',
  },
  resolver: '<rootDir>/compat/nest12/resolver.cjs',
  setupFilesAfterEnv: ['<rootDir>/compat/nest12/setup.mjs'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 30_000,
  forceExit: true,
};
