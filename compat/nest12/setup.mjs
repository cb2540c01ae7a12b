// Per test file, before the tests (setupFilesAfterEnv of jest.nest12.config.cjs).
import { jest } from '@jest/globals';
import * as microservices from '@nestjs/microservices';

// See microservices-shim.cjs.
globalThis[Symbol.for('nestjs-idempotency:nest12:microservices')] = microservices;

// CommonJS test files use the `jest` global; Jest only injects it into CommonJS modules.
globalThis.jest = jest;
