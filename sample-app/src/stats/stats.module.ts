import { Module } from '@nestjs/common';
import { StatsService } from './stats.service';

/** Its own module so that `IdempotencyModule.forRootAsync` can import it for `onEvent`. */
@Module({ providers: [StatsService], exports: [StatsService] })
export class StatsModule {}
