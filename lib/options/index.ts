export * from './defaults';
export * from './duration';
export * from './module-options';
export * from './option-names';
export * from './route-options';
export * from './secrets';
