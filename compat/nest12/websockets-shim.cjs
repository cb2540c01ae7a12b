// @nestjs/websockets, as microservices-shim.cjs does @nestjs/microservices: the library loads it
// lazily with require() (lib/adapters/ws-context.adapter.ts), which Jest 29's module registry
// cannot do for the ESM-only Nest 12 package; this run answers with the module the tests imported.
const loaded = globalThis[Symbol.for('nestjs-idempotency:nest12:websockets')];
if (loaded === undefined) throw new Error('compat/nest12/setup.mjs did not run');
module.exports = loaded;
