export {
  derivedIdempotencyKey,
  tryDerivedIdempotencyKey,
  deriveKey,
  type DerivationSettings,
} from './derived-key';
export { runClaimed } from './run-claimed';
export { propagateThroughAxios, type AxiosInstanceLike } from './axios';
