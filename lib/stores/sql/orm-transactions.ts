// Transitional: the interceptor still imports queryableTransaction from here; it moves to
// ./transaction with the rest of the transaction-handle knowledge, and goes once nothing calls it.
export { queryableTransaction } from './transaction';
