// Per test file, before the tests (setupFilesAfterEnv of jest.nest12.config.cjs).
import { jest } from '@jest/globals';
import * as microservices from '@nestjs/microservices';
import * as websockets from '@nestjs/websockets';

// See microservices-shim.cjs (and websockets-shim.cjs, the same for @nestjs/websockets).
globalThis[Symbol.for('nestjs-idempotency:nest12:microservices')] = microservices;
globalThis[Symbol.for('nestjs-idempotency:nest12:websockets')] = websockets;

// CommonJS test files use the `jest` global; Jest only injects it into CommonJS modules.
globalThis.jest = jest;
