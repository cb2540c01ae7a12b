import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule);
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port, '127.0.0.1');
  const store = process.env.REDIS_URL ? `Redis at ${process.env.REDIS_URL}` : 'the in-memory store';
  console.log(`Sample app listening on http://127.0.0.1:${port} using ${store}`);
  console.log(
    `Try: curl -i -X POST http://127.0.0.1:${port}/payments -H 'Idempotency-Key: demo-1' ` +
      `-H 'Content-Type: application/json' -d '{"amount":100,"currency":"EUR"}'`,
  );
}

void bootstrap();
