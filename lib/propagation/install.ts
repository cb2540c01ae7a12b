import type { ModulesContainer } from '@nestjs/core';
import { secretProblem, type ResolvedModuleOptions } from '../options';
import { propagateThroughHttpServices } from './axios';
import { propagateThroughClientProxy } from './client-proxy';
import { propagateThroughFetch } from './fetch';

/**
 * Called at boot with whether the module or any route sets `propagateKeys`: checks the secret
 * keys are derived with, then wraps the outbound clients (global `fetch`, `ClientProxy`, every
 * `@nestjs/axios` HttpService). With no route asking, nothing is wrapped and no peer is loaded.
 */
export function preparePropagation(
  wanted: boolean,
  options: ResolvedModuleOptions,
  modules: ModulesContainer,
): void {
  if (!wanted) return;
  const problem = secretProblem(options.keyDerivationSecret);
  if (problem) {
    throw new Error(
      `IdempotencyModule: \`propagateKeys\` derives keys with a secret every replica shares: ${problem}`,
    );
  }
  propagateOutboundCalls();
  propagateThroughHttpServices(modules);
}

/**
 * Wraps global `fetch` and `ClientProxy` (once; later calls do nothing). Runs at boot, and again
 * whenever a propagating run starts (see `runClaimed`), for runners that do not boot routes.
 */
export function propagateOutboundCalls(): void {
  propagateThroughFetch();
  propagateThroughClientProxy();
}
