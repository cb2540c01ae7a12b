import {
  type CanActivate,
  type ExecutionContext,
  Inject,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';
import { timingSafeEqual } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { SampleConfig } from '../config';

/** The one operator the sample knows: `operator` with the password `OPS_PASSWORD`. */
export const OPERATOR_USER = 'operator';

/**
 * The sample's stand-in for an admin login: HTTP Basic authentication, which a browser asks for
 * by itself. Without the right credentials, 401 and a prompt. In your app, use the guard your
 * other admin tools run behind (a session, a role, SSO).
 */
@Injectable()
export class OperatorsGuard implements CanActivate {
  constructor(@Inject(SampleConfig) private readonly config: SampleConfig) {}

  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const { authorization } = http.getRequest<{ headers: Record<string, string> }>().headers;
    const expected = Buffer.from(`${OPERATOR_USER}:${this.config.opsPassword}`);
    const given = Buffer.from(
      /^Basic ([A-Za-z0-9+/=]+)$/.exec(authorization ?? '')?.[1] ?? '',
      'base64',
    );
    if (given.length === expected.length && timingSafeEqual(given, expected)) return true;
    http.getResponse<ServerResponse>().setHeader('WWW-Authenticate', 'Basic realm="operators"');
    throw new UnauthorizedException();
  }
}
