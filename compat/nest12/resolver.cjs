// Jest resolver for the NestJS 12 run:
// - compat/nest12/node_modules comes first, as if it were the app's node_modules (so @nestjs/*,
//   rxjs and reflect-metadata are Nest 12's single copies), then the repository's node_modules
//   for everything else (ioredis, amqplib, test tools);
// - a test reaching into lib/ (`../../lib`, `../../lib/testing`) gets the ESM build instead
//   (compat/nest12/dist, from npm run test:nest12): the same files `import 'nestjs-idempotency'`
//   loads, so there is one copy of the library.
const { existsSync } = require('node:fs');
const { join, relative, resolve } = require('node:path');

const NEST12 = __dirname;
const ROOT = resolve(NEST12, '..', '..');
const LIB = join(ROOT, 'lib');
const NEST12_MODULES = join(NEST12, 'node_modules');
/** ESM-only Nest 12 packages the library require()s lazily, and the shim answering for each. */
const SHIMS = {
  '@nestjs/microservices': join(NEST12, 'microservices-shim.cjs'),
  '@nestjs/websockets': join(NEST12, 'websockets-shim.cjs'),
};

function packageName(request) {
  const parts = request.split('/');
  return request.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

module.exports = (request, options) => {
  if (request.startsWith('.')) {
    const target = resolve(options.basedir, request);
    if (target === LIB || target.startsWith(LIB + '/')) {
      return options.defaultResolver(join(NEST12, 'dist', relative(LIB, target)), options);
    }
  }
  const bare = !request.startsWith('.') && !request.startsWith('/') && !request.startsWith('node:');
  if (bare && existsSync(join(NEST12_MODULES, packageName(request)))) {
    // See microservices-shim.cjs: Jest 29 cannot require() an ES module.
    if (SHIMS[request] && options.conditions?.includes('require')) return SHIMS[request];
    if (!options.basedir.startsWith(NEST12_MODULES)) options = { ...options, basedir: NEST12 };
  }
  return options.defaultResolver(request, options);
};
