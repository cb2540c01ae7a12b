import { Controller } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { Idempotent } from 'nestjs-idempotency';
import { StatsService } from '../stats/stats.service';
import { OrdersService } from './orders.service';

/** `order.shipped` event, published at least once by the warehouse. */
export interface OrderShipped {
  eventId: string;
  orderId: string;
}

@Controller()
export class OrdersConsumer {
  constructor(
    private readonly orders: OrdersService,
    private readonly stats: StatsService,
  ) {}

  /** Keyed by the event's own id: a redelivered event is skipped. */
  @EventPattern('order.shipped')
  @Idempotent({ key: (ctx) => ctx.switchToRpc().getData<OrderShipped>().eventId })
  onShipped(@Payload() event: OrderShipped): void {
    this.stats.executed('OrdersConsumer.onShipped');
    this.orders.markShipped(event.orderId);
  }
}
