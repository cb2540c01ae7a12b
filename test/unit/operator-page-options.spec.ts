import { Injectable, type CanActivate } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { GUARDS_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { IdempotencyOperatorPageModule } from '../../lib';
import { CONTENT_SECURITY_POLICY, escapeHtml, html, layout } from '../../lib/operator-page/html';
import { resolveOperatorPageOptions } from '../../lib/operator-page/operator-page.options';

@Injectable()
class AdminGuard implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}

describe('IdempotencyOperatorPageModule.register() options', () => {
  const production = { NODE_ENV: 'production' };

  it('refuses a page without a guard when NODE_ENV is production, naming the fix', () => {
    expect(() => resolveOperatorPageOptions({ path: '/ops', guards: false }, production)).toThrow(
      'IdempotencyOperatorPageModule.register(): NODE_ENV is production and the page has no ' +
        'guard (guards: false): whoever reaches it could read and delete every record. Pass the ' +
        'guard your admin routes use, e.g. guards: [AdminGuard]',
    );
    const previous = process.env.NODE_ENV;
    process.env.NODE_ENV = 'production';
    try {
      expect(() => IdempotencyOperatorPageModule.register({ path: '/ops', guards: false })).toThrow(
        /NODE_ENV is production and the page has no guard/,
      );
    } finally {
      process.env.NODE_ENV = previous;
    }
  });

  it('mounts a page without a guard only when asked in so many words, outside production', () => {
    const resolved = resolveOperatorPageOptions({ path: 'ops/', guards: false }, {});
    expect(resolved).toEqual({ path: '/ops', guards: [], keyPrefix: undefined, pageSize: 50 });
    for (const guards of [undefined, [], null, ['AdminGuard'], AdminGuard]) {
      expect(() => resolveOperatorPageOptions({ path: '/ops', guards }, {})).toThrow(
        /guards must list the guards the page runs behind, e.g. \[AdminGuard\]/,
      );
    }
  });

  it('refuses at boot a class that is no guard: a service, or a guard factory not called', () => {
    @Injectable()
    class AdminService {
      isAdmin(): boolean {
        return true;
      }
    }
    // As @nestjs/passport's AuthGuard: a function that returns the guard class, passed uncalled
    // (`guards: [AuthGuard]` for `guards: [AuthGuard('jwt')]`).
    const AuthGuard = (type?: string) => {
      class MixinAuthGuard implements CanActivate {
        canActivate(): boolean {
          return type !== undefined;
        }
      }
      return MixinAuthGuard;
    };
    for (const guards of [[AdminService], [AdminGuard, AuthGuard]]) {
      expect(() => resolveOperatorPageOptions({ path: '/ops', guards }, {})).toThrow(
        /guards must list the guards the page runs behind, e.g. \[AdminGuard\] \(classes with a canActivate method/,
      );
    }
    const resolved = resolveOperatorPageOptions({ path: '/ops', guards: [AuthGuard('jwt')] }, {});
    expect(resolved.guards).toHaveLength(1);
  });

  it('refuses a misspelt option with the nearest name', () => {
    expect(() =>
      resolveOperatorPageOptions({ path: '/ops', gaurds: [AdminGuard] }, production),
    ).toThrow(
      'IdempotencyOperatorPageModule.register(): unknown option `gaurds` (did you mean `guards`?)',
    );
    expect(() =>
      resolveOperatorPageOptions({ path: '/ops', guards: [AdminGuard], pagesize: 20 }, {}),
    ).toThrow('unknown option `pagesize` (did you mean `pageSize`?)');
  });

  it.each([
    [{ path: '' }, /path must be a path such as '\/ops\/idempotency'/],
    [{ path: '/ops/:id' }, /path must be a path/],
    [{ path: '/ops?x=1' }, /path must be a path/],
    [{ path: 42 }, /path must be a path/],
    [{ imports: {} }, /imports must be an array of modules/],
    [{ keyPrefix: 1 }, /keyPrefix must be a string, got 1/],
    [{ pageSize: 0 }, /pageSize must be a whole number from 1 to 500, got 0/],
    [{ pageSize: 501 }, /pageSize must be a whole number from 1 to 500/],
    [{ pageSize: 2.5 }, /pageSize must be a whole number/],
  ])('refuses the value %o', (value, message) => {
    const options = { path: '/ops', guards: [AdminGuard], ...value };
    expect(() => resolveOperatorPageOptions(options, {})).toThrow(message);
  });

  it('gives each registration a controller of its own, with its path and guards', () => {
    const instance = { canActivate: () => true };
    const first = IdempotencyOperatorPageModule.register({ path: '/a', guards: [AdminGuard] });
    const second = IdempotencyOperatorPageModule.register({ path: '/b/c', guards: [instance] });
    const [one] = first.controllers!;
    const [two] = second.controllers!;
    expect(one).not.toBe(two);
    expect(Reflect.getMetadata(PATH_METADATA, one)).toBe('/a');
    expect(Reflect.getMetadata(PATH_METADATA, two)).toBe('/b/c');
    expect(Reflect.getMetadata(GUARDS_METADATA, one)).toEqual([AdminGuard]);
    expect(Reflect.getMetadata(GUARDS_METADATA, two)).toEqual([instance]);
  });
});

describe('the page templates', () => {
  it('escape every interpolated value: markup in a key is text', () => {
    const key = `<img src=x onerror=alert(1)>"'&`;
    expect(escapeHtml(key)).toBe('&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;');
    expect(html`<td title="${key}">${key}</td>`.markup).toBe(
      '<td title="&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;">' +
        '&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;</td>',
    );
    // Prettier lays templates out: compared without their white space.
    const list = html`<ul>
      ${['<a>', html`<li>${'<b>'}</li>`]}
    </ul>`.markup;
    expect(list.replace(/\s+/g, '')).toBe('<ul>&lt;a&gt;<li>&lt;b&gt;</li></ul>');
    expect(html`${undefined}${null}${false}${0}`.markup).toBe('0');
  });
});

describe('the page layout', () => {
  it('holds one stylesheet, the one the CSP allows by its hash, and no script', () => {
    const page = layout('Title', '/ops', 'idempotency:', html`<p>body</p>`);
    const styles = [...page.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((match) => match[1]);
    expect(styles).toHaveLength(1);
    const hash = createHash('sha256').update(styles[0]).digest('base64');
    expect(CONTENT_SECURITY_POLICY).toContain(`style-src 'sha256-${hash}'`);
    expect(page).not.toMatch(/<script|style=|<link/i);
  });
});
