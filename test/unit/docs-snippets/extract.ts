import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** A fenced ```ts block of a docs page. */
export interface DocsBlock {
  /** The page, relative to the repository root: `README.md`, `docs/postgres.md`. */
  page: string;
  /** 1-based line of the opening fence; the code starts on the next line. */
  fenceLine: number;
  /** The code between the fences, as written. */
  code: string;
  /**
   * A `<!-- not compiled: reason -->` line right above the fence: the block is not checked, or,
   * as `<!-- not compiled on NestJS 12: reason -->`, not checked on that lane only.
   */
  notCompiled?: { reason: string; lane?: string };
}

/** The marker a page puts on the line before a block that is not meant to compile. */
export const NOT_COMPILED = /^<!--\s*not compiled(?: on (NestJS \d+))?:\s*(.*?)\s*-->$/;

/** README.md and every docs/*.md (a new page is picked up without a change here). */
export function docsPages(root: string): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

/** Every ```ts block of the page (```typescript too), with its line and marker. */
/** Whether the block is checked on the lane (`NestJS 11`, `NestJS 12`). */
export function checkedOn(block: DocsBlock, lane: string): boolean {
  return (
    !block.notCompiled || (block.notCompiled.lane !== undefined && block.notCompiled.lane !== lane)
  );
}

export function extractBlocks(root: string, page: string): DocsBlock[] {
  const lines = readFileSync(join(root, page), 'utf8').split('\n');
  const blocks: DocsBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*(ts|typescript)\s*$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence] = open;
    const start = i;
    const code: string[] = [];
    for (i++; i < lines.length && lines[i].trim() !== fence; i++) {
      code.push(lines[i].startsWith(indent) ? lines[i].slice(indent.length) : lines[i]);
    }
    const marker = NOT_COMPILED.exec((lines[start - 1] ?? '').trim());
    blocks.push({
      page,
      fenceLine: start + 1,
      code: code.join('\n'),
      ...(marker && { notCompiled: { reason: marker[2], lane: marker[1] } }),
    });
  }
  return blocks;
}
