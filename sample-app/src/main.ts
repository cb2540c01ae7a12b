import { describeStore, readConfig } from './config';
import { startSampleApp } from './sample-app';

async function bootstrap(): Promise<void> {
  const config = readConfig();
  const { app, url, tcp } = await startSampleApp(config);
  app.enableShutdownHooks();
  console.log(`Sample app: HTTP on ${url}, TCP microservice on ${tcp.host}:${tcp.port}`);
  console.log(`Idempotency records in ${describeStore(config.store)}`);
  console.log(
    `Try: curl -i -X POST ${url}/payments -H 'Idempotency-Key: demo-1' ` +
      `-H 'Content-Type: application/json' -d '{"amount":100,"currency":"EUR"}'`,
  );
  console.log(`Or run the whole tour: DEMO_URL=${url} npm run demo`);
  console.log(
    `Operator page: ${url}/ops/idempotency (user operator, password from OPS_PASSWORD: ` +
      `"demo" unless set)`,
  );
}

bootstrap().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
