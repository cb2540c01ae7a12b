import { IsIn, IsInt, IsOptional, IsPositive, IsString, MaxLength } from 'class-validator';

/** Body of `POST /payments`; the global ValidationPipe answers 400 when it does not match. */
export class CreatePaymentDto {
  /** In minor units (cents). */
  @IsInt()
  @IsPositive()
  amount!: number;

  @IsIn(['EUR', 'USD', 'GBP'])
  currency!: string;

  @IsOptional()
  @IsString()
  @MaxLength(140)
  description?: string;
}
