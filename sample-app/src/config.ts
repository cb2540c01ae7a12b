import { DynamicModule, Module } from '@nestjs/common';
import type { IdempotencyModuleOptions } from 'nestjs-idempotency';

/** Where the idempotency records live. */
export type StoreConfig =
  | { kind: 'memory' }
  | { kind: 'redis'; url: string }
  | { kind: 'cluster'; nodes: { host: string; port: number }[] };

/** Everything the sample reads from the environment, parsed once at startup. */
export interface SampleConfig {
  /** HTTP port (`PORT`, default 3000; 0 picks a free one). */
  port: number;
  /** Microservice TCP port (`TCP_PORT`, default 3001). */
  tcpPort: number;
  /** Interface both servers bind to. */
  host: string;
  /** `REDIS_CLUSTER_NODES` ("host:port,host:port"), else `REDIS_URL`, else the memory store. */
  store: StoreConfig;
  /** Prefix of the idempotency records (`IDEMPOTENCY_KEY_PREFIX`, default the module's). */
  keyPrefix?: string;
  /** Simulated payment provider latency, in milliseconds (`PAYMENT_DELAY_MS`, default 100). */
  paymentDelayMs: number;
  /** How long `POST /reports` works, in milliseconds (`REPORT_DELAY_MS`, default 1500). */
  reportDelayMs: number;
  /** The operator page's password for the user `operator` (`OPS_PASSWORD`, default `demo`). */
  opsPassword: string;
}

/** DI token of {@link SampleConfig}. */
export const SampleConfig = Symbol('SampleConfig');

/** Reads the configuration from environment variables; throws on a malformed value. */
export function readConfig(env: NodeJS.ProcessEnv = process.env): SampleConfig {
  return {
    port: integer(env, 'PORT', 3000),
    tcpPort: integer(env, 'TCP_PORT', 3001),
    host: '127.0.0.1',
    store: readStore(env),
    keyPrefix: env.IDEMPOTENCY_KEY_PREFIX || undefined,
    paymentDelayMs: integer(env, 'PAYMENT_DELAY_MS', 100),
    reportDelayMs: integer(env, 'REPORT_DELAY_MS', 1500),
    opsPassword: env.OPS_PASSWORD || 'demo',
  };
}

/** The module's `redis` option for a store configuration (undefined: the memory store). */
export function redisOption(store: StoreConfig): IdempotencyModuleOptions['redis'] {
  switch (store.kind) {
    case 'memory':
      return undefined;
    case 'redis':
      return store.url;
    case 'cluster':
      return { clusterNodes: store.nodes };
  }
}

/** A line for the startup log; credentials in a Redis URL are masked. */
export function describeStore(store: StoreConfig): string {
  switch (store.kind) {
    case 'memory':
      return 'the in-memory store (process-local)';
    case 'redis':
      return `Redis at ${store.url.replace(/\/\/([^@/]*):[^@/]*@/, '//$1:***@')}`;
    case 'cluster':
      return `Redis Cluster at ${store.nodes.map((n) => `${n.host}:${n.port}`).join(', ')}`;
  }
}

/** Makes the configuration injectable everywhere (`@Inject(SampleConfig)`). */
@Module({})
export class SampleConfigModule {
  static forRoot(config: SampleConfig): DynamicModule {
    return {
      module: SampleConfigModule,
      global: true,
      providers: [{ provide: SampleConfig, useValue: config }],
      exports: [SampleConfig],
    };
  }
}

function readStore(env: NodeJS.ProcessEnv): StoreConfig {
  if (env.REDIS_CLUSTER_NODES) {
    const nodes = env.REDIS_CLUSTER_NODES.split(',').map((node) => {
      const [host, port] = node.trim().split(':');
      if (!host || !/^\d+$/.test(port ?? '')) {
        throw new Error(`REDIS_CLUSTER_NODES: expected host:port, got ${JSON.stringify(node)}`);
      }
      return { host, port: Number(port) };
    });
    return { kind: 'cluster', nodes };
  }
  if (env.REDIS_URL) return { kind: 'redis', url: env.REDIS_URL };
  return { kind: 'memory' };
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new Error(`${name} must be a whole number, got ${raw}`);
  return Number(raw);
}
