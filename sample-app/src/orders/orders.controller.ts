import { Body, Controller, Get, NotFoundException, Param, Post } from '@nestjs/common';
import { Idempotent } from 'nestjs-idempotency';
import { StatsService } from '../stats/stats.service';
import { CreateOrderDto } from './create-order.dto';
import { type Order, OrdersService } from './orders.service';

@Controller('orders')
export class OrdersController {
  constructor(
    private readonly orders: OrdersService,
    private readonly stats: StatsService,
  ) {}

  /** The key is optional here: a request without one runs unprotected. */
  @Post()
  @Idempotent()
  create(@Body() dto: CreateOrderDto): Order {
    this.stats.executed('OrdersController.create');
    return this.orders.place(dto);
  }

  @Get(':id')
  find(@Param('id') id: string): Order {
    const order = this.orders.find(id);
    if (!order) throw new NotFoundException(`No order ${id}`);
    return order;
  }
}
