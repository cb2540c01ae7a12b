// One Jest run, four projects: `npm test` runs them all (then the ioredis 5 and NestJS 12 lanes);
// `npx jest --selectProjects unit` runs one. Unit tests need no service and no global set-up;
// the others talk to real services, and their global set-up picks the Redis they share.

const { shared, services } = require('./jest.shared');

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    { ...shared, displayName: 'unit', roots: ['<rootDir>/test/unit'], testRegex: '\\.spec\\.ts$' },
    {
      ...services,
      displayName: 'e2e',
      roots: ['<rootDir>/test/e2e', '<rootDir>/sample-app'],
      testRegex: '\\.(spec|e2e-spec)\\.ts$',
    },
    {
      ...services,
      displayName: 'reliability',
      roots: ['<rootDir>/test/reliability'],
      testRegex: '\\.e2e-spec\\.ts$',
    },
    {
      ...services,
      displayName: 'packaging',
      roots: ['<rootDir>/test/packaging'],
      testRegex: '\\.e2e-spec\\.ts$',
    },
  ],
  testTimeout: 30_000,
  // A leaked handle (a client a test left connecting) must not hang `npm test` after every test
  // passed, in CI or on a laptop. Jest does not name it then: `npx jest --forceExit=false
  // --detectOpenHandles` does (none is left today).
  forceExit: true,
};
