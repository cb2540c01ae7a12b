import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as ts from 'typescript';
import { composeBlock, impliedImports, libraryEntries, type ComposedBlock } from './compose';
import type { DocsBlock } from './extract';

/** A NestJS line the blocks are checked against, as a fresh app of that line would see them. */
export interface Lane {
  name: string;
  /** Where the blocks' files are put (virtually): module resolution starts there. */
  dir: string;
  /** An ESM app (`"type": "module"`, Nest 12 is ESM-only) or CommonJS (the Nest 11 CLI's). */
  type: 'module' | 'commonjs';
  /**
   * A node_modules folder whose packages win over the root's for every file of the program (the
   * library's sources included), as the app's own NestJS would be the only one installed.
   */
  nodeModules?: string;
  /** Declarations that differ on this lane (a package the lane's NestJS pairs with). */
  declarations?: Record<string, string>;
}

/**
 * What `nest new --strict` writes into tsconfig.json (@nestjs/schematics 11, application template),
 * with noEmit for incremental/outDir/sourceMap and the @types the template installs (node).
 */
export const NEST_CLI_STRICT: ts.CompilerOptions = {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  resolvePackageJsonExports: true,
  esModuleInterop: true,
  isolatedModules: true,
  declaration: true,
  removeComments: true,
  emitDecoratorMetadata: true,
  experimentalDecorators: true,
  allowSyntheticDefaultImports: true,
  target: ts.ScriptTarget.ES2023,
  skipLibCheck: true,
  strictNullChecks: true,
  forceConsistentCasingInFileNames: true,
  noImplicitAny: true,
  strictBindCallApply: true,
  noFallthroughCasesInSwitch: true,
  noEmit: true,
  types: ['node'],
};

/**
 * `client.send(...)` as a statement of its own: ClientProxy.send returns a cold Observable, so
 * nothing is sent until it is subscribed. Type-correct, and a reader's message never leaves.
 */
function discardedSends(sourceFile: ts.SourceFile, checker: ts.TypeChecker): ts.Diagnostic[] {
  const found: ts.Diagnostic[] = [];
  const visit = (node: ts.Node) => {
    if (
      ts.isExpressionStatement(node) &&
      ts.isCallExpression(node.expression) &&
      ts.isPropertyAccessExpression(node.expression.expression) &&
      node.expression.expression.name.text === 'send' &&
      checker.getTypeAtLocation(node.expression).getSymbol()?.getName() === 'Observable'
    ) {
      found.push({
        category: ts.DiagnosticCategory.Error,
        code: 0,
        file: sourceFile,
        start: node.getStart(sourceFile),
        length: node.getWidth(sourceFile),
        messageText:
          'send() returns a cold Observable, discarded here: nothing is sent. ' +
          'Subscribe to it: `await firstValueFrom(client.send(...))`.',
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return found;
}

/** Where a diagnostic is: the docs page's line, or the completion's own line. */
function locate(composed: ComposedBlock, diagnostic: ts.Diagnostic): string {
  const code = diagnostic.code === 0 ? 'docs' : `TS${diagnostic.code}`;
  const message = `${code}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`;
  if (!diagnostic.file || diagnostic.start === undefined) return message;
  const { block } = composed;
  const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
  const index = line - composed.start;
  if (diagnostic.file.fileName.endsWith('.ts') && index >= 0 && index < composed.lines) {
    return `${block.page}:${block.fenceLine + 1 + index}:${character + 1} ${message}`;
  }
  const source = diagnostic.file.text.split('\n')[line]?.trim();
  return (
    `${block.page}:${block.fenceLine} (the block's completion, test/unit/docs-snippets/` +
    `completions.ts, at \`${source}\`) ${message}`
  );
}

/**
 * Type-checks every block in one program (each block its own module), under the Nest CLI's strict
 * tsconfig, against the lane's NestJS. Returns, per block, its errors located in the docs page.
 */
export function checkBlocks(
  root: string,
  lane: Lane,
  blocks: DocsBlock[],
): Map<DocsBlock, string[]> {
  const implied = impliedImports(root);
  const files = new Map<string, ComposedBlock>();
  for (const block of blocks) {
    const name = `${block.page.replace(/[^\w]/g, '_')}_L${block.fenceLine}.ts`;
    files.set(join(lane.dir, name), composeBlock(block, implied, lane.declarations));
  }
  // The app's package.json says its module system; so does the library's (virtually): an ESM app
  // loads the package's ESM build, a CommonJS app its CommonJS build.
  const packageJsons = new Map([
    [join(lane.dir, 'package.json'), JSON.stringify({ private: true, type: lane.type })],
    [join(root, 'lib', 'package.json'), JSON.stringify({ type: lane.type })],
  ]);
  const options = NEST_CLI_STRICT;
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile, directoryExists, getSourceFile } = host;
  host.fileExists = (file) => files.has(file) || packageJsons.has(file) || fileExists(file);
  host.readFile = (file) => files.get(file)?.text ?? packageJsons.get(file) ?? readFile(file);
  host.directoryExists = (dir) => dir === lane.dir || (directoryExists?.(dir) ?? true);
  host.getSourceFile = (file, language, onError, create) => {
    const composed = files.get(file);
    return composed
      ? ts.createSourceFile(file, composed.text, language)
      : getSourceFile(file, language, onError, create);
  };
  const entries = libraryEntries(root);
  const cache = ts.createModuleResolutionCache(root, (f) => f, options);
  const preferred = (name: string) => {
    if (!lane.nodeModules || name.startsWith('.')) return false;
    const parts = name.split('/');
    const pkg = name.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
    return existsSync(join(lane.nodeModules, pkg, 'package.json'));
  };
  host.resolveModuleNameLiterals = (literals, containingFile, redirected, opts, sourceFile) =>
    literals.map((literal) => {
      const name = literal.text;
      if (entries[name]) {
        return {
          resolvedModule: {
            resolvedFileName: entries[name],
            extension: ts.Extension.Ts,
            isExternalLibraryImport: false,
          },
        };
      }
      // lib/'s relative imports have no extension (its ESM build gets them at build time).
      const fromLib = name.startsWith('.') && containingFile.startsWith(join(root, 'lib'));
      const mode = fromLib
        ? ts.ModuleKind.CommonJS
        : ts.getModeForUsageLocation(sourceFile, literal, opts);
      // The lane's NestJS for every importer, as the app's node_modules would hold only it.
      const from = preferred(name) ? join(lane.nodeModules!, '..', 'importer.ts') : containingFile;
      return ts.resolveModuleName(name, from, opts, host, cache, redirected, mode);
    });
  const program = ts.createProgram({ rootNames: [...files.keys()], options, host });
  const global = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()];
  if (global.length > 0) {
    throw new Error(ts.formatDiagnostics(global, host));
  }
  const results = new Map<DocsBlock, string[]>();
  for (const [file, composed] of files) {
    const sourceFile = program.getSourceFile(file)!;
    const diagnostics = [
      ...program.getSyntacticDiagnostics(sourceFile),
      ...program.getSemanticDiagnostics(sourceFile),
    ];
    const discarded = discardedSends(sourceFile, program.getTypeChecker());
    results.set(
      composed.block,
      [...diagnostics, ...discarded].map((d) => locate(composed, d)),
    );
  }
  return results;
}
