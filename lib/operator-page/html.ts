import { createHash } from 'node:crypto';

/** Markup that is already safe: built by {@link html}, never from a caller's text. */
export class Html {
  constructor(readonly markup: string) {}

  toString(): string {
    return this.markup;
  }
}

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** `value` as text in an element or a quoted attribute: `<img src=x>` shows as those characters. */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]);
}

/**
 * A template whose every interpolated value is escaped, unless it is {@link Html} (a fragment
 * built here) or an array of them; `undefined`, `null` and `false` leave nothing. Escaping is
 * the default, so a key, route or step name can only ever be text.
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let markup = strings[0];
  values.forEach((value, i) => {
    markup += fragment(value) + strings[i + 1];
  });
  return new Html(markup);
}

function fragment(value: unknown): string {
  if (value instanceof Html) return value.markup;
  if (Array.isArray(value)) return value.map(fragment).join('');
  if (value === undefined || value === null || value === false) return '';
  return escapeHtml(value);
}

/** The page's one stylesheet: inline, allowed by its hash (the CSP allows nothing else). */
const STYLE = `
:root{color-scheme:light;--ink:#1d2430;--muted:#5d6778;--line:#dde2ea;--bg:#f6f7f9;--accent:#2456c7;
--run:#2456c7;--stuck:#b3261e;--half:#a15c00;--done:#2e7d32}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);background:var(--bg)}
header{background:#18202e;color:#fff;padding:14px 24px;display:flex;align-items:baseline;gap:16px}
header h1{margin:0;font-size:18px;font-weight:600}
header a{color:#fff;text-decoration:none}
header .prefix{color:#aab4c5;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
main{padding:20px 24px;max-width:1200px}
h2{font-size:16px;margin:0 0 12px}
a{color:var(--accent)}
.tabs{display:flex;gap:10px;margin-bottom:16px;flex-wrap:wrap}
.tab{display:block;min-width:150px;padding:10px 14px;background:#fff;border:1px solid var(--line);
border-radius:8px;text-decoration:none;color:var(--ink)}
.tab .n{display:block;font-size:24px;font-weight:600}
.tab.current{border-color:var(--accent);box-shadow:inset 0 -3px 0 var(--accent)}
.running .n{color:var(--run)}.stuck .n{color:var(--stuck)}.half_done .n{color:var(--half)}.completed .n{color:var(--done)}
form.filters{display:flex;gap:8px;align-items:end;flex-wrap:wrap;margin-bottom:14px}
label{display:flex;flex-direction:column;font-size:12px;color:var(--muted);gap:2px}
input,select{font:inherit;padding:5px 8px;border:1px solid var(--line);border-radius:6px;background:#fff}
button,.button{font:inherit;padding:6px 14px;border-radius:6px;border:1px solid var(--accent);
background:var(--accent);color:#fff;cursor:pointer;text-decoration:none;display:inline-block}
.button.plain{background:#fff;color:var(--accent)}
button.danger,.button.danger{background:var(--stuck);border-color:var(--stuck);color:#fff}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line);border-radius:8px}
th,td{text-align:left;padding:8px 10px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:12px;color:var(--muted);font-weight:600;background:#fafbfc}
td.key,dd.key,code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;word-break:break-all}
.steps{margin:0;padding-left:18px}
.muted{color:var(--muted)}
.badge{display:inline-block;padding:1px 7px;border-radius:10px;font-size:12px;background:#eef1f6}
.badge.error{background:#fde7e6;color:var(--stuck)}
.notice{padding:10px 14px;border-radius:8px;background:#e8f3ea;border:1px solid #b9dcc0;margin-bottom:14px}
.problem{padding:10px 14px;border-radius:8px;background:#fde7e6;border:1px solid #f3b8b3;margin-bottom:14px}
.pages{margin-top:12px;display:flex;gap:12px}
dl{display:grid;grid-template-columns:160px 1fr;gap:6px 16px;background:#fff;border:1px solid var(--line);
border-radius:8px;padding:14px 16px;margin:0 0 16px}
dt{color:var(--muted)}dd{margin:0}
.actions{display:flex;gap:10px;align-items:center}
`;

/** The Content-Security-Policy of every page: nothing but the stylesheet above, no scripts. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`,
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

/**
 * The stylesheet's element, built outside any template: the hash covers its text to the byte, so
 * no formatter may lay it out.
 */
const STYLE_ELEMENT = new Html(`<style>${STYLE}</style>`);

/** Headers of every page the page answers (see docs/operators.md#the-operator-page). */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
};

/** A whole document: the title, the header linking back to the list, and `body`. */
export function layout(title: string, base: string, keyPrefix: string, body: Html): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="robots" content="noindex" />
        <title>${title} · idempotency records</title>
        ${STYLE_ELEMENT}
      </head>
      <body>
        <header>
          <h1><a href="${base}">Idempotency records</a></h1>
          <span class="prefix">${keyPrefix}</span>
        </header>
        <main>${body}</main>
      </body>
    </html> `.markup;
}
