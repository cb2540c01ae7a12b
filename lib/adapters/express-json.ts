import { existsSync, readFileSync } from 'node:fs';
import { peerFile } from '../utils/load-optional';

/** Whether each `res.json` met is Express's own (see {@link isExpressJson}). */
const expressJson = new WeakMap<object, boolean>();
/** The source of the Express that Nest's adapter loads (`lib/response.js`); null: not found. */
let expressSource: string | null | undefined;

/**
 * Whether `json` is Express's own `res.json()`, not one an APM agent, a body logger or a
 * redaction wrapped or replaced (on the response, the app's prototype or Express's): its source
 * is part of Express's `lib/response.js`. A replacement may need the value a replay sends.
 */
export function isExpressJson(json: unknown): boolean {
  if (typeof json !== 'function') return false;
  let genuine = expressJson.get(json);
  if (genuine === undefined) {
    if (expressSource === undefined) {
      const file = peerFile('@nestjs/platform-express', 'express', 'lib/response.js');
      expressSource = file && existsSync(file) ? readFileSync(file, 'utf8') : null;
    }
    genuine = expressSource?.includes(Function.prototype.toString.call(json)) ?? false;
    expressJson.set(json, genuine);
  }
  return genuine;
}
