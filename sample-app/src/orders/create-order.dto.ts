import { IsInt, IsNotEmpty, IsString, Max, Min } from 'class-validator';

/** Body of `POST /orders`. */
export class CreateOrderDto {
  @IsString()
  @IsNotEmpty()
  sku!: string;

  @IsInt()
  @Min(1)
  @Max(100)
  quantity!: number;
}
