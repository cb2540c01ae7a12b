import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { DynamicModule, Module } from '@nestjs/common';
import { GraphQLModule } from '@nestjs/graphql';
import {
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyOperatorPageModule,
} from 'nestjs-idempotency';
import { CheckoutsController } from './checkouts/checkouts.controller';
import { MailerService } from './checkouts/mailer.service';
import { redisOption, SampleConfig, SampleConfigModule } from './config';
import { OrdersConsumer } from './orders/orders.consumer';
import { OrdersController } from './orders/orders.controller';
import { OrdersService } from './orders/orders.service';
import { OperatorsGuard } from './operators/operators.guard';
import { PaymentsConsumer } from './payments/payments.consumer';
import { PaymentsController } from './payments/payments.controller';
import { PaymentsResolver } from './payments/payments.resolver';
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
        // POST /graphql: the chargePayment mutation (Apollo on Express, schema built from code).
        GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, autoSchemaFile: true }),
        IdempotencyModule.forRootAsync({
          imports: [StatsModule],
          inject: [SampleConfig, StatsService],
          useFactory: (config: SampleConfig, stats: StatsService): IdempotencyModuleOptions => ({
            redis: redisOption(config.store), // undefined: the in-memory store
            keyPrefix: config.keyPrefix,
            onEvent: (event) => stats.outcome(event),
          }),
        }),
        // The operator page (GET /ops/idempotency): records by state, behind the sample's login.
        IdempotencyOperatorPageModule.register({
          path: '/ops/idempotency',
          guards: [OperatorsGuard],
        }),
      ],
      controllers: [
        PaymentsController,
        OrdersController,
        ReportsController,
        CheckoutsController,
        StatsController,
        PaymentsConsumer,
        OrdersConsumer,
      ],
      providers: [PaymentsService, OrdersService, PaymentsResolver, MailerService],
    };
  }
}
