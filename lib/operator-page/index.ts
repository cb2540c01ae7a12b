export { IdempotencyOperatorPageModule } from './operator-page.module';
export type { IdempotencyOperatorPageOptions } from './operator-page.options';
