import { Body, Controller, Get, NotFoundException, Param, Post } from '@nestjs/common';
import { Idempotent } from 'nestjs-idempotency';

interface Payment {
  id: number;
  amount: number;
  currency: string;
}

@Controller('payments')
export class PaymentsController {
  private readonly payments = new Map<number, Payment>();

  /** Charging twice is the bug this module exists to prevent: retries replay the first result. */
  @Post()
  @Idempotent({ required: true })
  create(@Body() body: { amount: number; currency: string }): Payment {
    const payment = { id: this.payments.size + 1, amount: body.amount, currency: body.currency };
    this.payments.set(payment.id, payment);
    return payment;
  }

  @Get(':id')
  find(@Param('id') id: string): Payment {
    const payment = this.payments.get(Number(id));
    if (!payment) throw new NotFoundException(`No payment ${id}`);
    return payment;
  }
}
