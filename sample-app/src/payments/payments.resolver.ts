import { Args, Field, ID, Int, Mutation, ObjectType, Query, Resolver } from '@nestjs/graphql';
import { Idempotent } from 'nestjs-idempotency';
import { StatsService } from '../stats/stats.service';
import { PaymentsService } from './payments.service';

@ObjectType('Payment')
export class PaymentModel {
  @Field(() => ID)
  id!: string;

  @Field(() => Int)
  amount!: number;

  @Field()
  currency!: string;

  @Field()
  status!: string;

  /** A Date: Nest's DateTime scalar serialises it, on the first call and on a replay alike. */
  @Field()
  capturedAt!: Date;
}

/** The same payments over GraphQL (POST /graphql): the mutation runs once per key. */
@Resolver(() => PaymentModel)
export class PaymentsResolver {
  constructor(
    private readonly payments: PaymentsService,
    private readonly stats: StatsService,
  ) {}

  @Query(() => PaymentModel, { nullable: true })
  payment(@Args('id', { type: () => ID }) id: string): PaymentModel | undefined {
    const payment = this.payments.find(id);
    return payment && { ...payment, capturedAt: new Date() };
  }

  /** Key: the request's Idempotency-Key header; a refusal is a GraphQL error (extensions.code). */
  @Mutation(() => PaymentModel, { nullable: true })
  @Idempotent({ required: true })
  async chargePayment(
    @Args('amount', { type: () => Int }) amount: number,
    @Args('currency') currency: string,
  ): Promise<PaymentModel> {
    this.stats.executed('PaymentsResolver.chargePayment');
    const payment = await this.payments.charge({ amount, currency });
    return { ...payment, capturedAt: new Date() };
  }
}
