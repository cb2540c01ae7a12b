// Per test file, before the tests (setupFilesAfterEnv of jest.nest12.config.cjs).
import { jest } from '@jest/globals';
import * as microservices from '@nestjs/microservices';

// See microservices-shim.cjs.
globalThis[Symbol.for('nestjs-idempotency:nest12:microservices')] = microservices;

// CommonJS test files use the `jest` global; Jest only injects it into CommonJS modules.
globalThis.jest = jest;

// sample-app/src/demo.ts is a CLI too: it runs main() when `require.main === module`, names ESM
// does not define. A test importing it must not run it; here the two compare unequal, as in CJS.
globalThis.require = { main: undefined };
globalThis.module = {};
