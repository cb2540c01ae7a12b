import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { SampleConfig } from '../config';
import { CreatePaymentDto } from './create-payment.dto';

export interface Payment extends CreatePaymentDto {
  id: string;
  status: 'captured' | 'refunded';
  refunded: number;
}

export interface Refund {
  id: string;
  paymentId: string;
  amount: number;
}

/** Stands in for a payment provider: every call here is a side effect that must not repeat. */
@Injectable()
export class PaymentsService {
  private readonly payments = new Map<string, Payment>();

  constructor(@Inject(SampleConfig) private readonly config: SampleConfig) {}

  async charge(dto: CreatePaymentDto): Promise<Payment> {
    await sleep(this.config.paymentDelayMs); // the provider call
    const payment: Payment = { id: randomUUID(), ...dto, status: 'captured', refunded: 0 };
    this.payments.set(payment.id, payment);
    return payment;
  }

  find(id: string): Payment | undefined {
    return this.payments.get(id);
  }

  /** Refunds part or all of a payment; undefined when there is no such payment or not enough left. */
  refund(paymentId: string, amount: number): Refund | undefined {
    const payment = this.payments.get(paymentId);
    if (!payment || amount > payment.amount - payment.refunded) return undefined;
    payment.refunded += amount;
    if (payment.refunded === payment.amount) payment.status = 'refunded';
    return { id: randomUUID(), paymentId, amount };
  }
}
