export * from './defaults';
export * from './duration';
export * from './known-names';
export * from './module-options';
export * from './option-names';
export * from './route-options';
export * from './run-options';
export * from './secrets';
