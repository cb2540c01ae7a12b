import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { IdempotencyErrorCode } from '../../lib';

const root = join(__dirname, '..', '..');
const read = (path: string) => readFileSync(path, 'utf8');

/** The Markdown files whose relative links must resolve: the README, the docs and their neighbours. */
const docs = [
  'README.md',
  'CONTRIBUTING.md',
  join('bench', 'README.md'),
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => join('docs', name)),
];

/**
 * Markdown outside fenced code blocks: where links and headings are. Inline code spans are
 * emptied (a link inside one is not a link), unless `keepCode` (a heading's text keeps them).
 */
function prose(markdown: string, keepCode = false): string {
  let fenced = false;
  return markdown
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        fenced = !fenced;
        return '';
      }
      if (fenced) return '';
      return keepCode ? line : line.replace(/`[^`\n]*`/g, '``');
    })
    .join('\n');
}

/**
 * The anchor GitHub gives a heading (github-slugger): its text as rendered, lower-cased, without
 * punctuation but `-` and `_`, each space a hyphen; a repeated slug gets `-1`, `-2`, ...
 */
function slug(heading: string, seen = new Map<string, number>()): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .trim()
    .toLowerCase();
  const base = text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
  const count = seen.get(base) ?? 0;
  seen.set(base, count + 1);
  return count === 0 ? base : `${base}-${count}`;
}

/** Every anchor a Markdown file offers: its headings' slugs and explicit `id` / `name` attributes. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const line of prose(markdown, true).split('\n')) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) found.add(slug(heading[1], seen));
    for (const match of line.matchAll(/\s(?:id|name)="([^"]+)"/g)) found.add(match[1]);
  }
  return found;
}

/** The link targets of a Markdown file (inline links and images), as written. */
function links(markdown: string): string[] {
  return [...prose(markdown).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map(
    (match) => match[1],
  );
}

/** What is wrong with a relative link from `file`, or undefined when it resolves. */
function brokenLink(file: string, target: string): string | undefined {
  const [path, anchor] = target.split('#', 2) as [string, string | undefined];
  const resolved = path === '' ? join(root, file) : resolve(root, dirname(file), decodeURI(path));
  if (!existsSync(resolved)) return `${target}: no file ${relative(root, resolved)}`;
  if (anchor === undefined || !resolved.endsWith('.md') || statSync(resolved).isDirectory()) {
    return undefined;
  }
  if (!anchors(read(resolved)).has(decodeURIComponent(anchor))) {
    return `${target}: no heading #${anchor} in ${relative(root, resolved)}`;
  }
  return undefined;
}

describe('docs/errors.md', () => {
  const errors = read(join(root, 'docs', 'errors.md'));

  it.each(Object.values(IdempotencyErrorCode))(
    'has the heading that problem details link to for %s',
    (code) => {
      // problemDetails types are `…/docs/errors.md#<code in lower case>`: the anchor of this heading.
      expect(errors).toMatch(new RegExp(`^## ${code}$`, 'm'));
      expect(anchors(errors).has(code.toLowerCase())).toBe(true);
    },
  );
});

describe('relative links', () => {
  it('are slugged as GitHub does', () => {
    const seen = new Map<string, number>();
    expect(slug('Problem details (RFC 9457)', seen)).toBe('problem-details-rfc-9457');
    expect(slug('RabbitMQ with manual ack (`noAck: false`)', seen)).toBe(
      'rabbitmq-with-manual-ack-noack-false',
    );
    expect(slug('IDEMPOTENCY_KEY_REUSED', seen)).toBe('idempotency_key_reused');
    expect(slug('Results: the run of 2026-11-23', seen)).toBe('results-the-run-of-2026-11-23');
    expect(slug('Problem details (RFC 9457)', seen)).toBe('problem-details-rfc-9457-1');
  });

  it('finds the links of the README', () => {
    expect(links(read(join(root, 'README.md')))).toEqual(
      expect.arrayContaining(['docs/README.md', 'docs/errors.md', 'bench/README.md']),
    );
  });

  it.each(docs)('in %s reach a file and heading that exist', (file) => {
    const broken = links(read(join(root, file)))
      .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))
      .map((target) => brokenLink(file, target))
      .filter((problem) => problem !== undefined);
    expect(broken).toEqual([]);
  });
});
