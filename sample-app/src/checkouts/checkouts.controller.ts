import { Body, Controller, Delete, HttpCode, Post, Put } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { IdempotencyService, Idempotent } from 'nestjs-idempotency';
import { StatsService } from '../stats/stats.service';
import { CreateCheckoutDto } from './create-checkout.dto';
import { MailerService } from './mailer.service';

/** The three steps of a checkout, in order, as `GET /stats` counts them (`step: <name>`). */
export const CHECKOUT_STEPS = ['reserve stock', 'charge payment', 'send confirmation'] as const;

@Controller()
export class CheckoutsController {
  constructor(
    private readonly idempotency: IdempotencyService,
    private readonly mailer: MailerService,
    private readonly stats: StatsService,
  ) {}

  /**
   * A resumable checkout: each step runs once per key and its result is recorded, so a retry
   * after a failure (the mail provider down at the third step) resumes at the step that failed:
   * the stock is not reserved again, the card not charged again. Until that retry comes, the
   * operator page lists the checkout as half done.
   */
  @Post('checkouts')
  @Idempotent({ required: true, resumable: true })
  async create(@Body() dto: CreateCheckoutDto) {
    this.stats.executed('CheckoutsController.create');
    const [reserve, charge, confirm] = CHECKOUT_STEPS;
    const reservation = await this.idempotency.step(reserve, async () => {
      this.stats.executed(`step: ${reserve}`);
      return { id: `res-${randomUUID().slice(0, 8)}`, sku: dto.sku, quantity: dto.quantity };
    });
    const payment = await this.idempotency.step(charge, async () => {
      this.stats.executed(`step: ${charge}`);
      return { id: `ch-${randomUUID().slice(0, 8)}`, amount: dto.quantity * 1250 };
    });
    const mail = await this.idempotency.step(confirm, async () => {
      this.stats.executed(`step: ${confirm}`);
      return this.mailer.send(dto.email, `Order ${reservation.id} confirmed`);
    });
    return { reservation, payment, confirmation: mail.messageId };
  }

  /** Fault injection for the demo: the mail provider goes down... */
  @Put('mailer/outage')
  @HttpCode(204)
  startOutage(): void {
    this.mailer.setOutage(true);
  }

  /** ...and comes back. */
  @Delete('mailer/outage')
  @HttpCode(204)
  endOutage(): void {
    this.mailer.setOutage(false);
  }
}
