// Turns tsc's ES-module output (dist/esm, from tsconfig.build-esm.json) into a package Node's ESM
// loader accepts, keeping one extensionless TypeScript source tree:
//   1. dist/esm/package.json says "type": "module" (the root package.json stays CommonJS);
//   2. relative specifiers get the `.js` / `/index.js` that ESM requires (in .js and .d.ts files);
//      a regex over tsc's own output is enough, as tsc prints every specifier as a plain string;
//   3. the one CommonJS-only expression, in utils/load-optional.js, becomes `import.meta.url`;
//   4. the build fails if any other CommonJS global is left (it would only fail at run time).
// Dual-package hazard: the package's `exports` map sends `import` here and `require` to dist/,
// two copies of every class (IdempotencyModule, the IdempotencyStore token...). An app must load
// only one: Nest apps are CommonJS or ESM throughout, and the packaging test checks that each
// scratch app resolves the build of its own module system.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// dist/esm, or the folder given (npm run test:nest12 builds a private copy in compat/nest12/dist).
const ESM_DIR = resolve(
  process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'esm'),
);
const SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.\.?\/[^'"]*|\.\.?)\2/g;
const CJS_ONLY = 'const HERE = pathToFileURL(__filename).href;';

function withExtension(file, specifier) {
  if (specifier.endsWith('.js')) return specifier;
  const target = resolve(dirname(file), specifier);
  if (existsSync(`${target}.js`)) return `${specifier}.js`;
  if (existsSync(join(target, 'index.js'))) return `${specifier}/index.js`;
  throw new Error(`finish-esm-build: ${file} imports ${specifier}, which does not exist`);
}

function* files(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else if (/\.(js|d\.ts)$/.test(entry.name)) yield path;
  }
}

writeFileSync(join(ESM_DIR, 'package.json'), '{ "type": "module" }\n');
for (const file of files(ESM_DIR)) {
  let code = readFileSync(file, 'utf8').replace(
    SPECIFIER,
    (_, before, quote, specifier) => `${before}${quote}${withExtension(file, specifier)}${quote}`,
  );
  if (file.endsWith('.js')) {
    if (file === join(ESM_DIR, 'utils', 'load-optional.js')) {
      if (!code.includes(CJS_ONLY)) throw new Error(`finish-esm-build: ${CJS_ONLY} not in ${file}`);
      code = code.replace(CJS_ONLY, 'const HERE = import.meta.url;');
    }
    // Comments may name them; code may not.
    const lines = code.split('\n').filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line));
    const leftover = lines.find((line) =>
      /\b(__dirname|__filename|require\s*\(|module\.exports)/.test(line),
    );
    if (leftover)
      throw new Error(`finish-esm-build: CommonJS-only code in ${file}: ${leftover.trim()}`);
  }
  writeFileSync(file, code);
}
