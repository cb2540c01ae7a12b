import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkBlocks, type Lane } from './docs-snippets/check';
import { NEST12_DECLARATIONS, PAGES } from './docs-snippets/completions';
import { checkedOn, docsPages, extractBlocks, type DocsBlock } from './docs-snippets/extract';

/**
 * Every ```ts block of README.md and docs/*.md, as a reader copies it into a fresh
 * `nest new --strict` app: each block one module of one program, completed only with what it
 * implies (test/unit/docs-snippets/completions.ts), type-checked under the Nest CLI's strict
 * tsconfig (nodenext) against NestJS 11 (a CommonJS app) and NestJS 12 (an ESM app). A block not
 * meant to compile says so on the line above its fence: `<!-- not compiled: reason -->`, or
 * `<!-- not compiled on NestJS 12: reason -->` for one lane (an integration without a release
 * for it).
 */

const ROOT = join(__dirname, '..', '..');
const NEST12 = join(ROOT, 'compat', 'nest12', 'node_modules');
const blocks = docsPages(ROOT).flatMap((page) => extractBlocks(ROOT, page));

const LANES: Lane[] = [
  { name: 'NestJS 11', dir: join(ROOT, 'test', 'unit', 'docs-snippets', 'app'), type: 'commonjs' },
  {
    name: 'NestJS 12',
    dir: join(ROOT, 'compat', 'nest12', 'docs-snippets-app'),
    type: 'module',
    nodeModules: NEST12,
    declarations: NEST12_DECLARATIONS,
  },
];

/** Blocks that must fail, and where: the check's own messages, checked with the real ones. */
const PROBES: { block: DocsBlock; errors: string[] }[] = [
  {
    block: { page: 'docs/probe.md', fenceLine: 10, code: 'const a = 1;\nconst b: string = a;' },
    errors: ["docs/probe.md:12:7 TS2322: Type 'number' is not assignable to type 'string'."],
  },
  {
    block: { page: 'docs/probe.md', fenceLine: 20, code: "client.send('payments.charge', {});" },
    errors: [
      'docs/probe.md:21:1 docs: send() returns a cold Observable, discarded here: nothing is ' +
        'sent. Subscribe to it: `await firstValueFrom(client.send(...))`.',
    ],
  },
];

function nestVersion(nodeModules: string): string {
  const file = join(nodeModules, '@nestjs', 'core', 'package.json');
  return existsSync(file)
    ? (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version
    : '';
}

describe('the ```ts blocks of the README and docs/', () => {
  it('are found (README.md and every docs/*.md)', () => {
    expect(blocks.filter((block) => !block.notCompiled).length).toBeGreaterThan(20);
    expect(new Set(blocks.map((block) => block.page))).toContain('README.md');
  });

  it('give a reason (and a lane that exists) wherever they are marked not compiled', () => {
    const lanes = LANES.map((lane) => lane.name);
    const unexplained = blocks.filter(
      ({ notCompiled }) =>
        notCompiled &&
        (notCompiled.reason === '' ||
          (notCompiled.lane !== undefined && !lanes.includes(notCompiled.lane))),
    );
    expect(unexplained.map((block) => `${block.page}:${block.fenceLine}`)).toEqual([]);
  });

  it('have a block for every completion (a completion whose block changed is stale)', () => {
    const stale = Object.entries(PAGES).flatMap(([page, { blocks: completions = [] }]) =>
      completions
        .filter((c) => !blocks.some((b) => b.page === page && b.code.includes(c.match)))
        .map((c) => `${page}: no block contains ${JSON.stringify(c.match)}`),
    );
    expect(stale).toEqual([]);
  });

  describe.each(LANES)('on $name', (lane) => {
    const compiled = blocks.filter((block) => checkedOn(block, lane.name));
    let results: Map<DocsBlock, string[]>;

    beforeAll(() => {
      if (lane.nodeModules && !nestVersion(lane.nodeModules).startsWith('12.')) {
        throw new Error(
          'NestJS 12 is not installed in compat/nest12: run `npm run compat:install`',
        );
      }
      results = checkBlocks(ROOT, lane, [...compiled, ...PROBES.map((probe) => probe.block)]);
    }, 120_000);

    it('names the page, line and column of an error (probe blocks)', () => {
      expect(PROBES.map((probe) => results.get(probe.block))).toEqual(
        PROBES.map((probe) => probe.errors),
      );
    });

    it.each(compiled.map((block) => [`${block.page}:${block.fenceLine}`, block] as const))(
      '%s compiles',
      (_, block) => {
        const errors = results.get(block)!;
        if (errors.length > 0) {
          throw new Error(
            `${errors.length} error(s) in the block at ${block.page}:${block.fenceLine} on ` +
              `${lane.name}:\n${errors.join('\n')}`,
          );
        }
      },
    );
  });
});
