// Settings the Jest configurations share (jest.config.js projects, jest.ioredis5.config.js).

/**
 * ts-jest compiles each file on its own (`isolatedModules`: a transpile, no type check per file,
 * which cost most of a suite's start-up); `npm test` type-checks lib/, test/ and sample-app/ once
 * with `tsc --noEmit` (`npm run typecheck`) before any lane runs. Const enums stay objects
 * (`preserveConstEnums`), as a file compiled alone cannot inline another file's.
 */
const transpileOnly = { isolatedModules: true, preserveConstEnums: true };

/** What every project shares: ts-jest, and the package name mapped to the sources. */
const shared = {
  testEnvironment: 'node',
  rootDir: '.',
  transform: { '^.+\\.tsx?$': ['ts-jest', { tsconfig: transpileOnly }] },
  moduleNameMapper: {
    '^nestjs-idempotency$': '<rootDir>/lib/index.ts',
    '^nestjs-idempotency/testing$': '<rootDir>/lib/testing/index.ts',
    // ESM-only under mercurius: see the file.
    '^content-disposition$': '<rootDir>/test/support/content-disposition.cjs',
  },
};

/** Projects on real services: Redis (picked once per run), PostgreSQL, brokers, processes. */
const services = {
  ...shared,
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
};

module.exports = { shared, services, transpileOnly };
