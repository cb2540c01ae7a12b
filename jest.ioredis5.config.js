// The Redis tests again with ioredis 5 (the lower half of the peer range `^5.6 || ^6`) in place
// of ioredis 6: every `import 'ioredis'`, the library's own included, resolves to ioredis5
// (an npm alias of the newest ioredis 5).
const { testTimeout, forceExit } = require('./jest.config');
const { services } = require('./jest.shared');

/** @type {import('jest').Config} */
module.exports = {
  ...services,
  roots: ['<rootDir>/test/e2e'],
  testRegex:
    '(redis-store\\.contract|wait-mode|redis-behaviour|redis-operator|redis-send-path|redis-steps|redis-steps-cost|resumable-redis|redis-listing)\\.e2e-spec\\.ts$',
  moduleNameMapper: { ...services.moduleNameMapper, '^ioredis$': 'ioredis5' },
  testTimeout,
  forceExit,
};
