/** @type {import('jest').Config} */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  rootDir: '.',
  roots: ['<rootDir>/test', '<rootDir>/sample-app'],
  testRegex: '.*\\.(spec|e2e-spec)\\.ts$',
  moduleNameMapper: {
    '^nestjs-idempotency$': '<rootDir>/lib/index.ts',
    '^nestjs-idempotency/testing$': '<rootDir>/lib/testing/index.ts',
  },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 30_000,
  // In CI a leaked handle must not hang the run for its whole time budget; Jest still names it.
  forceExit: process.env.CI === 'true',
};
