import { Body, Controller, Inject, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Idempotent } from 'nestjs-idempotency';
import { SampleConfig } from '../config';
import { StatsService } from '../stats/stats.service';
import { CreateReportDto } from './create-report.dto';

@Controller('reports')
export class ReportsController {
  constructor(
    @Inject(SampleConfig) private readonly config: SampleConfig,
    private readonly stats: StatsService,
  ) {}

  /**
   * Slow on purpose (REPORT_DELAY_MS): a duplicate sent while it runs gets 409 with Retry-After
   * instead of starting a second report.
   */
  @Post()
  @Idempotent()
  async create(@Body() dto: CreateReportDto) {
    this.stats.executed('ReportsController.create');
    await sleep(this.config.reportDelayMs);
    return { id: randomUUID(), period: dto.period, generatedAt: new Date().toISOString() };
  }

  /**
   * The same slow report with `onConflict: 'wait'`: a duplicate sent while it runs waits for it
   * and gets its response (Idempotent-Replayed: true) instead of a 409.
   */
  @Post('wait')
  @Idempotent({ onConflict: 'wait' })
  async createAndWait(@Body() dto: CreateReportDto) {
    this.stats.executed('ReportsController.createAndWait');
    await sleep(this.config.reportDelayMs);
    return { id: randomUUID(), period: dto.period, generatedAt: new Date().toISOString() };
  }
}
