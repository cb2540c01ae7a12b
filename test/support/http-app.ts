import {
  type INestApplication,
  Module,
  type NestApplicationOptions,
  type Type,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { IdempotencyModule, type IdempotencyModuleOptions } from '../../lib';
import type { Platform } from './test-app';

/** Creates `module`'s app on Express or Fastify, Nest's logger off unless `options` say. */
export function createHttpApp(
  platform: Platform,
  module: Type,
  options: NestApplicationOptions = {},
): Promise<INestApplication> {
  const settings = { logger: false as const, ...options };
  return platform === 'fastify'
    ? NestFactory.create(module, new FastifyAdapter(), settings)
    : NestFactory.create(module, settings);
}

/** The app's URL on 127.0.0.1 (Nest may report `[::1]` for a loopback listener). */
export async function appUrl(app: INestApplication): Promise<string> {
  return (await app.getUrl()).replace('[::1]', '127.0.0.1');
}

/**
 * Boots `module` on Express or Fastify on a free port of 127.0.0.1, after `configure` (global
 * filters, interceptors...): the app and its base URL.
 */
export async function listen(
  platform: Platform,
  module: Type,
  configure?: (app: INestApplication) => void,
  options?: NestApplicationOptions,
): Promise<{ app: INestApplication; url: string }> {
  const app = await createHttpApp(platform, module, options);
  configure?.(app);
  await app.listen(0, '127.0.0.1');
  return { app, url: await appUrl(app) };
}

/** The app of a `describe` block, set once its `beforeAll` has booted it. */
export interface SuiteApp {
  app: INestApplication;
  url: string;
}

/**
 * Registers the enclosing `describe`'s hooks: `beforeAll` boots `controllers` with
 * `IdempotencyModule.forRoot(options())` on `platform`; `afterAll` closes it, then runs `cleanUp`
 * (a Redis prefix's keys, a table).
 */
export function appForSuite(
  platform: Platform,
  controllers: Type[],
  options: () => IdempotencyModuleOptions,
  cleanUp?: () => Promise<void>,
): SuiteApp {
  const suite = {} as SuiteApp;
  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot(options())], controllers })
    class AppModule {}
    Object.assign(suite, await listen(platform, AppModule));
  });
  afterAll(async () => {
    await suite.app?.close();
    await cleanUp?.();
  });
  return suite;
}
