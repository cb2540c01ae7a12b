import { Controller } from '@nestjs/common';
import { MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import { Idempotent } from 'nestjs-idempotency';
import { StatsService } from '../stats/stats.service';
import { PaymentsService, type Refund } from './payments.service';

/** `payments.refund` command. TCP carries no headers, so the key travels in the payload. */
export interface RefundCommand {
  paymentId: string;
  amount: number;
  idempotencyKey: string;
}

@Controller()
export class PaymentsConsumer {
  constructor(
    private readonly payments: PaymentsService,
    private readonly stats: StatsService,
  ) {}

  /** A redelivered command gets the first reply again instead of refunding twice. */
  @MessagePattern('payments.refund')
  @Idempotent({ required: true })
  refund(@Payload() command: RefundCommand): Refund {
    this.stats.executed('PaymentsConsumer.refund');
    const refund = this.payments.refund(command.paymentId, command.amount);
    if (!refund) {
      throw new RpcException({ status: 'error', message: `Cannot refund ${command.paymentId}` });
    }
    return refund;
  }
}
