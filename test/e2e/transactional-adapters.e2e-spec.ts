import { drizzleOrm, knexOrm, kyselyOrm, prismaOrm } from '../support/orm-cases';
import { describeTransactionalCompletion } from '../support/transactional-app';

// Transactional completion through each @nestjs-cls/transactional adapter a Nest team uses on
// PostgreSQL besides TypeORM (transactional.e2e-spec.ts): the same requests, the same promises.
describeTransactionalCompletion(drizzleOrm);
describeTransactionalCompletion(knexOrm);
describeTransactionalCompletion(kyselyOrm);
describeTransactionalCompletion(prismaOrm);
