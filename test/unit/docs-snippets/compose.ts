import { join } from 'node:path';
import * as ts from 'typescript';
import {
  DECLARATIONS,
  IMPLIED_IMPORTS,
  PAGES,
  WRAPPER_CLOSE,
  WRAPPER_OPEN,
  WRAPPER_OPEN_BARE,
  type BlockCompletion,
} from './completions';
import { exportedNames } from './exported-names';
import type { DocsBlock } from './extract';

/** A block as a file of the program, and where its own lines are in it. */
export interface ComposedBlock {
  block: DocsBlock;
  completion?: BlockCompletion;
  text: string;
  /** 0-based line of the file where the block's first line is. */
  start: number;
  lines: number;
}

const mentions = (text: string, name: string) =>
  new RegExp(`(?<![\\w$.])${name.replace(/\$/g, '\\$')}(?![\\w$])`).test(text);

/** Top-level names the text declares or imports. */
function declaredNames(text: string): Set<string> {
  const source = ts.createSourceFile('block.ts', text, ts.ScriptTarget.Latest);
  const names = new Set<string>();
  for (const s of source.statements) {
    if (ts.isImportDeclaration(s) && s.importClause) {
      const { name, namedBindings } = s.importClause;
      if (name) names.add(name.text);
      if (namedBindings && ts.isNamespaceImport(namedBindings)) names.add(namedBindings.name.text);
      if (namedBindings && ts.isNamedImports(namedBindings)) {
        for (const e of namedBindings.elements) names.add(e.name.text);
      }
    } else if (ts.isVariableStatement(s)) {
      for (const d of s.declarationList.declarations) {
        if (ts.isIdentifier(d.name)) names.add(d.name.text);
      }
    } else if (
      (ts.isClassDeclaration(s) ||
        ts.isFunctionDeclaration(s) ||
        ts.isInterfaceDeclaration(s) ||
        ts.isTypeAliasDeclaration(s) ||
        ts.isEnumDeclaration(s)) &&
      s.name
    ) {
      names.add(s.name.text);
    }
  }
  return names;
}

/** The library's entry points, as the package's exports map names them. */
export function libraryEntries(root: string): Record<string, string> {
  return {
    'nestjs-idempotency': join(root, 'lib', 'index.ts'),
    'nestjs-idempotency/testing': join(root, 'lib', 'testing', 'index.ts'),
    'nestjs-idempotency/swagger': join(root, 'lib', 'swagger', 'index.ts'),
    'nestjs-idempotency/terminus': join(root, 'lib', 'terminus', 'index.ts'),
  };
}

/** Every name a block may use without importing it, with the package it comes from. */
export function impliedImports(root: string): Map<string, string> {
  const implied = new Map<string, string>();
  for (const [from, names] of Object.entries(IMPLIED_IMPORTS)) {
    for (const name of names) implied.set(name, from);
  }
  for (const name of exportedNames(libraryEntries(root)['nestjs-idempotency'])) {
    if (!implied.has(name)) implied.set(name, 'nestjs-idempotency');
  }
  return implied;
}

/** The block with what completes it: imports, declarations, its wrapper. */
export function composeBlock(
  block: DocsBlock,
  implied: Map<string, string>,
  laneDeclarations: Record<string, string> = {},
): ComposedBlock {
  const page = PAGES[block.page] ?? {};
  const table = { ...DECLARATIONS, ...laneDeclarations };
  // A block with its own constructor gets a host class without one.
  const wrapperOpen = block.code.includes('constructor(') ? WRAPPER_OPEN_BARE : WRAPPER_OPEN;
  const completion = page.blocks?.find((c) => block.code.includes(c.match));
  const open =
    completion?.wrap === 'members'
      ? wrapperOpen
      : completion?.wrap === 'method'
        ? `${wrapperOpen}async docsBlock(): Promise<void> {\n`
        : '';
  const close =
    completion?.wrap === 'method'
      ? `\n}\n${completion.inside ?? ''}\n${WRAPPER_CLOSE}`
      : completion?.wrap === 'members'
        ? `\n${completion.inside ?? ''}\n${WRAPPER_CLOSE}`
        : '';
  const own = [page.prelude ?? '', completion?.before ?? '', open, block.code, close];
  const tail = completion?.after ?? '';
  const declared = declaredNames([...own, tail].join('\n'));

  // Declarations the block (or another declaration) uses.
  const chosen: string[] = [];
  let text = [...own, tail].join('\n');
  for (let added = true; added;) {
    added = false;
    for (const [name, code] of Object.entries(table)) {
      if (chosen.includes(name) || declared.has(name) || !mentions(text, name)) continue;
      chosen.push(name);
      text += `\n${code}`;
      added = true;
    }
  }
  // A declaration after those it uses (PgModule after PG_POOL).
  const ordered: string[] = [];
  const visiting = new Set<string>();
  const place = (name: string) => {
    if (ordered.includes(name) || visiting.has(name)) return; // placed, or a cycle
    visiting.add(name);
    for (const other of chosen) if (other !== name && mentions(table[name], other)) place(other);
    ordered.push(name);
  };
  chosen.forEach(place);
  const declarations = ordered.map((name) => table[name]);
  const declaredAll = new Set([...declared, ...chosen]);
  const imports = new Map<string, string[]>();
  for (const [name, from] of implied) {
    if (declaredAll.has(name) || !mentions(text, name)) continue;
    imports.set(from, [...(imports.get(from) ?? []), name]);
  }
  const head = [
    ...[...imports].map(([from, names]) => `import { ${names.join(', ')} } from '${from}';`),
    ...declarations,
    page.prelude ?? '',
    completion?.before ?? '',
    open,
  ].join('\n');
  const start = head.split('\n').length;
  return {
    block,
    completion,
    text: `${head}\n${block.code}${close}\n${tail}\nexport {};\n`,
    start,
    lines: block.code.split('\n').length,
  };
}
