// The floor's HTTP interceptor (NestJS on Express, JSON handlers), for bench/floor/app.js: a
// request with an Idempotency-Key claims it (bench/floor/floor.js); a duplicate of a completed
// request gets the stored status and body text as they are, one still running a 409. The
// outcome stored is the status (3 digits) and the body as Express sends it (JSON.stringify),
// and that same text is what the first request sends: the body is serialised once, and the
// replay is byte-for-byte the first response. An error releases the key and goes on to Nest's
// exception filters.
const { ConflictException } = require('@nestjs/common');
const { Observable, of } = require('rxjs');

const JSON_TYPE = 'application/json; charset=utf-8';

class FloorInterceptor {
  /** @param floor what createFloor() returns */
  constructor(floor) {
    this.floor = floor;
  }

  async intercept(context, next) {
    const http = context.switchToHttp();
    const key = http.getRequest().headers['idempotency-key'];
    if (!key) return next.handle();
    const response = http.getResponse();
    const { floor } = this;
    const token = floor.token();
    const record = await floor.claim(key, token);
    if (record !== null) {
      if (floor.pending(record)) throw new ConflictException(`${key} is in progress`);
      response.status(Number(record.slice(0, 3)));
      response.setHeader('content-type', JSON_TYPE);
      return of(record.slice(3));
    }
    // One Observable around the handler's, no operators: the body is stored (or the key
    // released) before the response leaves.
    return new Observable((subscriber) => {
      let body = '';
      return next.handle().subscribe({
        next: (value) => (body = JSON.stringify(value) ?? ''),
        error: (error) => {
          const fail = () => subscriber.error(error);
          floor.release(key, token).then(fail, fail);
        },
        complete: () => {
          floor.complete(key, token, `${response.statusCode}${body}`).then(
            () => {
              response.setHeader('content-type', JSON_TYPE);
              subscriber.next(body);
              subscriber.complete();
            },
            (error) => subscriber.error(error),
          );
        },
      });
    });
  }
}

module.exports = { FloorInterceptor };
