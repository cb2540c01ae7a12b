import { INestApplication, LogLevel, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MicroserviceOptions, Transport } from '@nestjs/microservices';
import { createServer } from 'node:net';
import { AppModule } from './app.module';
import { SampleConfig } from './config';

/** A started sample app: HTTP and the TCP microservice in one (hybrid) Nest application. */
export interface SampleApp {
  app: INestApplication;
  /** Base URL of the HTTP server, e.g. `http://127.0.0.1:3000`. */
  url: string;
  tcp: { host: string; port: number };
  close(): Promise<void>;
}

/** Boots the service as `main.ts` does; tests and the demo use it to start their own. */
export async function startSampleApp(
  config: SampleConfig,
  options: { logger?: LogLevel[] | false } = {},
): Promise<SampleApp> {
  const app = await NestFactory.create(AppModule.forRoot(config), { logger: options.logger });
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true }));
  const tcp = { host: config.host, port: config.tcpPort };
  // inheritAppConfig: without it the global ValidationPipe would skip the microservice.
  app.connectMicroservice<MicroserviceOptions>(
    { transport: Transport.TCP, options: tcp },
    { inheritAppConfig: true },
  );
  try {
    await app.startAllMicroservices();
    await app.listen(config.port, config.host);
  } catch (error) {
    await app.close(); // e.g. a port in use: leave nothing half-started behind
    throw error;
  }
  return { app, url: await app.getUrl(), tcp, close: () => app.close() };
}

/** A port nothing listens on right now: the TCP microservice needs one it can be told. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
