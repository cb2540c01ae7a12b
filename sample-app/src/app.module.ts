import { DynamicModule, Module } from '@nestjs/common';
import { IdempotencyModule, IdempotencyModuleOptions } from 'nestjs-idempotency';
import { redisOption, SampleConfig, SampleConfigModule } from './config';
import { OrdersConsumer } from './orders/orders.consumer';
import { OrdersController } from './orders/orders.controller';
import { OrdersService } from './orders/orders.service';
import { PaymentsConsumer } from './payments/payments.consumer';
import { PaymentsController } from './payments/payments.controller';
import { PaymentsService } from './payments/payments.service';
import { ReportsController } from './reports/reports.controller';
import { StatsController } from './stats/stats.controller';
import { StatsModule } from './stats/stats.module';
import { StatsService } from './stats/stats.service';

@Module({})
export class AppModule {
  /** The whole service; `config` comes from the environment (see `readConfig`). */
  static forRoot(config: SampleConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        SampleConfigModule.forRoot(config),
        StatsModule,
        IdempotencyModule.forRootAsync({
          imports: [StatsModule],
          inject: [SampleConfig, StatsService],
          useFactory: (config: SampleConfig, stats: StatsService): IdempotencyModuleOptions => ({
            redis: redisOption(config.store), // undefined: the in-memory store
            keyPrefix: config.keyPrefix,
            onEvent: (event) => stats.outcome(event),
          }),
        }),
      ],
      controllers: [
        PaymentsController,
        OrdersController,
        ReportsController,
        StatsController,
        PaymentsConsumer,
        OrdersConsumer,
      ],
      providers: [PaymentsService, OrdersService],
    };
  }
}
