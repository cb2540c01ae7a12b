import { Controller, Get, Inject } from '@nestjs/common';
import { describeStore, SampleConfig } from '../config';
import { type Stats, StatsService } from './stats.service';

/** What the service is and what it did: read by the demo and the tests. */
@Controller()
export class StatsController {
  constructor(
    @Inject(SampleConfig) private readonly config: SampleConfig,
    private readonly stats: StatsService,
  ) {}

  /** Where the microservice listens and which store is used, so a client can find them. */
  @Get()
  info() {
    return {
      service: 'nestjs-idempotency-sample',
      store: describeStore(this.config.store),
      tcp: { host: this.config.host, port: this.config.tcpPort },
    };
  }

  @Get('stats')
  read(): Stats {
    return this.stats.snapshot();
  }
}
