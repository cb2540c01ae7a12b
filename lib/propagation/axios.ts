import type { ModulesContainer } from '@nestjs/core';
import { isPropagating, propagatedKey } from './derived-key';
import { httpLabel, isUnsafeMethod, parseUrl, PROPAGATED_HEADER } from './fetch';

/** The parts of an axios request config used here (axios's InternalAxiosRequestConfig). */
interface AxiosRequest {
  method?: string;
  headers: { has(name: string): boolean; set(name: string, value: string): unknown };
}

/** The parts of an axios instance used here. */
interface AxiosLike {
  getUri(config?: object): string;
  interceptors: {
    request: {
      use(
        onFulfilled: (config: AxiosRequest) => AxiosRequest,
        onRejected?: null,
        options?: { runWhen?: (config: AxiosRequest) => boolean },
      ): number;
    };
  };
}

/**
 * An axios instance (`axios.create()`, an HttpService's `axiosRef`), typed loosely so that the
 * published types do not reference the optional `axios` package.
 */
export interface AxiosInstanceLike {
  getUri(...args: never[]): string;
  interceptors: { request: { use(...args: never[]): number } };
}

/** Axios instances that already carry the interceptor. */
const keyed = new WeakSet<object>();

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
      if (isAxiosLike(instance.axiosRef)) propagateThroughAxios(instance.axiosRef);
    }
  }
}

/** Whether `value` looks like an axios instance: request interceptors and `getUri`. */
function isAxiosLike(value: unknown): value is AxiosLike {
  const axios = value as Partial<AxiosLike> | null | undefined;
  return (
    typeof axios?.getUri === 'function' && typeof axios.interceptors?.request?.use === 'function'
  );
}

/**
 * Makes an axios instance send a propagated `Idempotency-Key` on non-safe requests made inside a
 * propagating handler, unless the request sets one. Axios runs request interceptors in the async
 * context of the call, so the handler's claim is the one seen here.
 */
export function propagateThroughAxios(instance: AxiosInstanceLike): void {
  const axios = instance as unknown as AxiosLike;
  if (keyed.has(axios)) return;
  keyed.add(axios);
  axios.interceptors.request.use(
    (config) => {
      const method = config.method ?? 'get';
      if (!isUnsafeMethod(method) || config.headers.has(PROPAGATED_HEADER)) return config;
      const url = parseUrl(axios.getUri(config));
      const key = url && propagatedKey(httpLabel(method, url));
      if (key) config.headers.set(PROPAGATED_HEADER, key);
      return config;
    },
    null,
    { runWhen: () => isPropagating() },
  );
}
