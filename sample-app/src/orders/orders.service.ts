import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { CreateOrderDto } from './create-order.dto';

export interface Order extends CreateOrderDto {
  id: string;
  status: 'placed' | 'shipped';
  shipments: number;
}

@Injectable()
export class OrdersService {
  private readonly orders = new Map<string, Order>();

  place(dto: CreateOrderDto): Order {
    const order: Order = { id: randomUUID(), ...dto, status: 'placed', shipments: 0 };
    this.orders.set(order.id, order);
    return order;
  }

  find(id: string): Order | undefined {
    return this.orders.get(id);
  }

  /** Not idempotent on purpose (it counts shipments): the decorator is what keeps it right. */
  markShipped(id: string): void {
    const order = this.orders.get(id);
    if (!order) return;
    order.status = 'shipped';
    order.shipments += 1;
  }
}
