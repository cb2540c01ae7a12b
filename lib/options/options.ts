/**
 * The path the options layer had before it was split by concern: everything it held, re-exported
 * so that importers keep working. New code imports from `lib/options` (its index).
 */
export * from './index';
