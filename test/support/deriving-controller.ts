import { Controller, Post } from '@nestjs/common';
import { derivedIdempotencyKey, Idempotent, tryDerivedIdempotencyKey } from '../../lib';

/** Two claimed routes answering the key derived for 'charge', by each of the two functions. */
@Controller()
export class DerivingController {
  @Post('derived')
  @Idempotent({ scope: 'public' })
  derived() {
    return { key: derivedIdempotencyKey('charge') };
  }

  @Post('try-derived')
  @Idempotent({ scope: 'public' })
  tryDerived() {
    return { key: tryDerivedIdempotencyKey('charge') ?? null };
  }
}
