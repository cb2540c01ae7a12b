// Settings the Jest configurations share (jest.config.js projects, jest.ioredis5.config.js).

/** What every project shares: ts-jest, and the package name mapped to the sources. */
const shared = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  rootDir: '.',
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

module.exports = { shared, services };
