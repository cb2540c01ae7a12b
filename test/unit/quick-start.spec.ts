import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The README's quick start runs the sample app, which has no authentication: its first request
 * logs the library's "no principal" warning. The quick start must say what it means and how to
 * silence it, in the words the log uses (read from lib/, so a reworded warning fails here).
 */

const ROOT = join(__dirname, '..', '..');

function libSources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? libSources(join(dir, entry.name))
      : entry.name.endsWith('.ts')
        ? [readFileSync(join(dir, entry.name), 'utf8')]
        : [],
  );
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ');

describe("the README's quick start", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('## Quick start');
  const quickStart = oneLine(readme.slice(start, readme.indexOf('\n## ', start + 1)));

  it('quotes the warning the first request logs, as lib/ words it', () => {
    const warnings = libSources(join(ROOT, 'lib')).flatMap((source) =>
      [...source.matchAll(/"(no principal \(request\.user\)[^"]*)"/g)].map((m) => m[1].trim()),
    );
    expect(warnings).toHaveLength(1);
    expect(quickStart).toContain(warnings[0]);
  });

  it("names the one line that silences it on a public route, scope: 'public'", () => {
    expect(quickStart).toContain("@Idempotent({ scope: 'public' })");
  });
});
