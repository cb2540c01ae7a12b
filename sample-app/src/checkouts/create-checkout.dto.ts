import { IsEmail, IsInt, IsNotEmpty, IsString, Max, Min } from 'class-validator';

/** Body of `POST /checkouts`. */
export class CreateCheckoutDto {
  @IsString()
  @IsNotEmpty()
  sku!: string;

  @IsInt()
  @Min(1)
  @Max(100)
  quantity!: number;

  @IsEmail()
  email!: string;
}
