export * from './store-contract';
