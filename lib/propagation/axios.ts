import type { ModulesContainer } from '@nestjs/core';
import type { AxiosInstance, InternalAxiosRequestConfig } from 'axios';
import { isPropagating, propagatedKey } from './derived-key';
import { httpLabel, isUnsafeMethod, parseUrl, PROPAGATED_HEADER } from './fetch';

/** Axios instances that already carry the interceptor. */
const keyed = new WeakSet<AxiosInstance>();

/**
 * Adds a request interceptor to every `@nestjs/axios` HttpService the app has (each HttpModule
 * import has its own axios instance). The interceptor runs only inside a propagating handler
 * (axios's `runWhen`), so other requests through the same instance are untouched. HttpServices
 * are recognised by their class name and their axios instance rather than by loading
 * `@nestjs/axios`: an app without it loads nothing, and its ESM-only releases need no import here.
 */
export function propagateThroughHttpServices(modules: ModulesContainer): void {
  for (const module of modules.values()) {
    for (const wrapper of module.providers.values()) {
      const instance = wrapper.instance as { axiosRef?: unknown } | null | undefined;
      if (instance?.constructor?.name !== 'HttpService') continue;
      if (isAxiosInstance(instance.axiosRef)) propagateThroughAxios(instance.axiosRef);
    }
  }
}

/** Whether `value` looks like an axios instance: request interceptors and `getUri`. */
function isAxiosInstance(value: unknown): value is AxiosInstance {
  const axios = value as Partial<AxiosInstance> | null | undefined;
  return (
    typeof axios?.getUri === 'function' && typeof axios.interceptors?.request?.use === 'function'
  );
}

/**
 * Makes an axios instance send a propagated `Idempotency-Key` on non-safe requests made inside a
 * propagating handler, unless the request sets one. Axios runs request interceptors in the async
 * context of the call, so the handler's claim is the one seen here.
 */
export function propagateThroughAxios(instance: AxiosInstance): void {
  if (keyed.has(instance)) return;
  keyed.add(instance);
  instance.interceptors.request.use(
    (config: InternalAxiosRequestConfig) => {
      const method = config.method ?? 'get';
      if (!isUnsafeMethod(method) || config.headers.has(PROPAGATED_HEADER)) return config;
      const url = parseUrl(instance.getUri(config));
      if (url) config.headers.set(PROPAGATED_HEADER, propagatedKey(httpLabel(method, url)));
      return config;
    },
    undefined,
    { runWhen: () => isPropagating() },
  );
}
