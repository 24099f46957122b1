// Prints what SquadUI's own decisions.md parser (DecisionService.ts,
// vendored in tests/corpora/squad/squadui-ai-team/) reads from memory
// files: per decision its title, date, author and 0-based line, as JSON.
//
//   cd tests/corpora/squad && node ../../interop/squadui/reading.mjs \
//     squad-head/.squad/decisions.md squadui-ai-team/.ai-team/decisions.md \
//     shapes/.squad/decisions.md > squadui-reading.json
//
// (needs `typescript`: `npm ci` in tests/interop/squadui/ first)
//
// The TypeScript is only transpiled (types dropped), never changed; its
// three imports are stood in for by what they do (line endings normalised;
// models are types only; toLocalDateKey is used for inbox files only).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import url from 'node:url';

const here = path.dirname(url.fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, 'package.json'));
const ts = require('typescript');
const source = path.join(here, '../../corpora/squad/squadui-ai-team/DecisionService.ts');
const js = ts.transpileModule(fs.readFileSync(source, 'utf8'), {
  compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2020 },
}).outputText;
const stubs = {
  '../models': {},
  '../utils/eol': { normalizeEol: (s) => s.replace(/\r\n?/g, '\n') },
  '../utils/dateUtils': { toLocalDateKey: (d) => d.toISOString().slice(0, 10) },
};
const module = { exports: {} };
new Function('require', 'module', 'exports', js)(
  (m) => stubs[m] ?? require(m),
  module,
  module.exports,
);
const { DecisionService } = module.exports;

const out = {};
for (const file of process.argv.slice(2)) {
  // parseDecisionsMd reads <root>/<folder>/decisions.md.
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'squadui-'));
  fs.mkdirSync(path.join(root, '.ai-team'));
  fs.copyFileSync(file, path.join(root, '.ai-team', 'decisions.md'));
  const found = [];
  new DecisionService('.ai-team').parseDecisionsMd(root, found);
  out[file] = found.map((d) => ({
    line: d.lineNumber,
    title: d.title,
    date: d.date ?? null,
    author: d.author ?? null,
  }));
  fs.rmSync(root, { recursive: true });
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
