// Builds the peer @nestarc/idempotency from its source: it is not on the npm registry, so
// bench/run.js needs a checkout of github.com/nestarc/idempotency (BENCH_NESTARC_SOURCE, default
// bench/nestarc/source, which git ignores). Its src/**/*.ts is transpiled file by file with the
// root's TypeScript into bench/nestarc/dist (also ignored); at run time it resolves NestJS 11,
// pg and the rest from the root's node_modules, as this library does (its peers: NestJS 10 or
// 11, ioredis 5). `node bench/nestarc/build.js` prints the dist folder, or exits 2 with a
// message when there is no source.
const {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} = require('node:fs');
const { dirname, join, relative } = require('node:path');
const ts = require('typescript');

const SOURCE = process.env.BENCH_NESTARC_SOURCE ?? join(__dirname, 'source');
const DIST = join(__dirname, 'dist');

function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return files(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The dist folder, built when missing or older than the source's package.json; or undefined. */
function buildNestarc() {
  const pkg = join(SOURCE, 'package.json');
  if (!existsSync(join(SOURCE, 'src', 'index.ts')) || !existsSync(pkg)) return undefined;
  const { name, version } = JSON.parse(readFileSync(pkg, 'utf8'));
  const stamp = join(DIST, 'BUILT');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === `${name}@${version}`) return DIST;
  rmSync(DIST, { recursive: true, force: true });
  const compilerOptions = {
    module: ts.ModuleKind.CommonJS,
    target: ts.ScriptTarget.ES2022,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    esModuleInterop: true,
  };
  for (const file of files(join(SOURCE, 'src'))) {
    const out = join(DIST, relative(join(SOURCE, 'src'), file).replace(/\.ts$/, '.js'));
    const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), {
      compilerOptions,
      fileName: file,
    });
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, outputText);
  }
  writeFileSync(join(DIST, 'package.json'), JSON.stringify({ name, version, main: 'index.js' }));
  writeFileSync(stamp, `${name}@${version}`);
  return DIST;
}

module.exports = { buildNestarc, NESTARC_SOURCE: SOURCE };

if (require.main === module) {
  const dist = buildNestarc();
  if (!dist) {
    console.error(`No @nestarc/idempotency source at ${SOURCE} (set BENCH_NESTARC_SOURCE)`);
    process.exit(2);
  }
  console.log(dist);
}
