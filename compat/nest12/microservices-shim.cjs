// The library loads @nestjs/microservices lazily with require() (lib/utils/load-optional.ts).
// Node >= 20.19 lets require() load the ESM-only Nest 12 package (no test runs that path in real
// Node yet: the packaging apps are HTTP-only); Jest 29's module registry cannot. So, in this run only, require('@nestjs/microservices')
// answers with the very module instance the tests imported, which setup.mjs puts here.
const loaded = globalThis[Symbol.for('nestjs-idempotency:nest12:microservices')];
if (loaded === undefined) throw new Error('compat/nest12/setup.mjs did not run');
module.exports = loaded;
