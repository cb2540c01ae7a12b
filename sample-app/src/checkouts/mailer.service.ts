import { Injectable, ServiceUnavailableException } from '@nestjs/common';

/**
 * The mail provider, as the sample simulates it: up, or down while an outage is on
 * (`PUT /mailer/outage`), which is how the demo makes a checkout fail at its third step.
 */
@Injectable()
export class MailerService {
  private down = false;
  private sent = 0;

  setOutage(down: boolean): void {
    this.down = down;
  }

  /** Sends an order confirmation; throws 503 while the provider is down. */
  async send(to: string, subject: string): Promise<{ messageId: string }> {
    if (this.down) throw new ServiceUnavailableException(`the mail provider is down (to ${to})`);
    this.sent += 1;
    return { messageId: `msg-${this.sent}: ${subject}` };
  }
}
