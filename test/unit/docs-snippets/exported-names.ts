import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as ts from 'typescript';

/**
 * The names a lib/ entry point exports, read from the sources' syntax (following `export *`), so a
 * block may use any export of the library without importing it, as the reader would add it.
 */
export function exportedNames(entry: string, seen = new Set<string>()): string[] {
  if (seen.has(entry)) return [];
  seen.add(entry);
  const source = ts.createSourceFile(entry, readFileSync(entry, 'utf8'), ts.ScriptTarget.Latest);
  const names: string[] = [];
  const isExported = (node: ts.Node) =>
    ts.canHaveModifiers(node) &&
    (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  for (const statement of source.statements) {
    if (ts.isExportDeclaration(statement)) {
      const from = statement.moduleSpecifier;
      if (statement.exportClause && ts.isNamedExports(statement.exportClause)) {
        names.push(...statement.exportClause.elements.map((e) => e.name.text));
      } else if (from && ts.isStringLiteral(from)) {
        names.push(...exportedNames(resolveRelative(entry, from.text), seen));
      }
    } else if (isExported(statement)) {
      if (ts.isVariableStatement(statement)) {
        for (const d of statement.declarationList.declarations) {
          if (ts.isIdentifier(d.name)) names.push(d.name.text);
        }
      } else if (
        (ts.isClassDeclaration(statement) ||
          ts.isFunctionDeclaration(statement) ||
          ts.isInterfaceDeclaration(statement) ||
          ts.isTypeAliasDeclaration(statement) ||
          ts.isEnumDeclaration(statement)) &&
        statement.name
      ) {
        names.push(statement.name.text);
      }
    }
  }
  return [...new Set(names)];
}

function resolveRelative(from: string, specifier: string): string {
  const base = join(dirname(from), specifier.replace(/\.js$/, ''));
  for (const candidate of [`${base}.ts`, join(base, 'index.ts')]) {
    try {
      readFileSync(candidate);
      return candidate;
    } catch {
      // the next candidate
    }
  }
  throw new Error(`${from}: cannot resolve ${specifier}`);
}
