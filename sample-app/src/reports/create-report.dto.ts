import { IsIn } from 'class-validator';

/** Body of `POST /reports`. */
export class CreateReportDto {
  @IsIn(['daily', 'monthly'])
  period!: 'daily' | 'monthly';
}
