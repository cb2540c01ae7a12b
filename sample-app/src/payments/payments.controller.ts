import { Body, Controller, Get, NotFoundException, Param, Post, Res } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { Idempotent } from 'nestjs-idempotency';
import { StatsService } from '../stats/stats.service';
import { CreatePaymentDto } from './create-payment.dto';
import { type Payment, PaymentsService } from './payments.service';

@Controller('payments')
export class PaymentsController {
  constructor(
    private readonly payments: PaymentsService,
    private readonly stats: StatsService,
  ) {}

  /**
   * Charging twice is the bug this module exists to prevent. A key is required; a retry gets the
   * first 201 replayed, Location header included (it is in the default `replayHeaders`).
   */
  @Post()
  @Idempotent({ required: true })
  async create(
    @Body() dto: CreatePaymentDto,
    @Res({ passthrough: true }) res: ServerResponse,
  ): Promise<Payment> {
    this.stats.executed('PaymentsController.create');
    const payment = await this.payments.charge(dto);
    res.setHeader('Location', `/payments/${payment.id}`);
    return payment;
  }

  @Get(':id')
  find(@Param('id') id: string): Payment {
    const payment = this.payments.find(id);
    if (!payment) throw new NotFoundException(`No payment ${id}`);
    return payment;
  }
}
