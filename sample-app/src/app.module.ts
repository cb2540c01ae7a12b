import { Module } from '@nestjs/common';
import { IdempotencyModule } from 'nestjs-idempotency';
import { PaymentsController } from './payments.controller';

@Module({
  // No REDIS_URL: the embedded in-memory store. Set REDIS_URL to share keys between instances.
  imports: [IdempotencyModule.forRoot({ redis: process.env.REDIS_URL || undefined })],
  controllers: [PaymentsController],
})
export class AppModule {}
