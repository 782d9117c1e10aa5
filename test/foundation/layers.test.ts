/**
 * The layer table (docs/architecture.md#layers) is enforced by lint, not only written down: ESLint's own Node API, with
 * the project's eslint.config.mjs, lints one small in-memory file per arrow. Every arrow against the table is an error
 * of `no-restricted-imports`; the arrows the table allows are not; and src/ as it is has none against it.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '..', '..');

interface LintCase {
  readonly filePath: string;
  readonly code: string;
}

/**
 * Lints `cases` (and, with `lintSrc`, every file of src/) with the project's config, in a plain Node process: ESLint
 * loads eslint.config.mjs with a dynamic import, which jest's module sandbox does not run. Only `no-restricted-imports`
 * runs, without type information (an in-memory file is in no TypeScript project): the same files, globs and patterns.
 */
function lint(cases: readonly LintCase[], lintSrc = false): LintRun {
  const script = `
    import { ESLint } from 'eslint';
    const { cases, lintSrc } = JSON.parse(process.env.PW_LINT_CASES);
    const eslint = new ESLint({
      cwd: process.cwd(),
      overrideConfig: { languageOptions: { parserOptions: { projectService: false } } },
      ruleFilter: ({ ruleId }) => ruleId === 'no-restricted-imports',
    });
    const results = [];
    for (const c of cases) results.push(...(await eslint.lintText(c.code, { filePath: c.filePath })));
    if (lintSrc) results.push(...(await eslint.lintFiles(['src'])));
    const { layers } = await import('./eslint.config.mjs');
    process.stdout.write(JSON.stringify({
      layers,
      results: results.map((r) => ({
        filePath: r.filePath,
        messages: r.messages.map((m) => (m.ruleId ?? 'fatal') + ': ' + m.message),
      })),
    }));
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: root,
    env: { ...process.env, PW_LINT_CASES: JSON.stringify({ cases, lintSrc }) },
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(out) as LintRun;
}

/** The lint results, and the layer table of eslint.config.mjs. */
interface LintRun {
  readonly results: { filePath: string; messages: string[] }[];
  readonly layers: Record<string, { readonly imports: string[]; readonly types?: string[] }>;
}

/** `src/domain/` -> `domain`, `src/api-main.ts` -> `api-main`. */
const layerName = (cell: string): string => cell.replace(/^src\//, '').replace(/(\/|\.ts)$/, '');

/** docs/architecture.md's layer table: each layer's value imports and type-only imports. */
function documentedLayers(): Record<string, { imports: string[]; types: string[] }> {
  const doc = readFileSync(path.join(root, 'docs', 'architecture.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Layers'), doc.indexOf('## A payment'));
  const rows = section.split('\n').filter((l) => /^\| `src\//.test(l));
  return Object.fromEntries(
    rows.map((row) => {
      const cells = row.split('|').map((c) => c.trim());
      const layer = layerName(/`([^`]+)`/.exec(cells[1] ?? '')?.[1] ?? '');
      const [values = '', types = ''] = (cells[3] ?? '').split('; types of');
      const names = (text: string) => [...text.matchAll(/`(src\/[^`]+)`/g)].map((m) => layerName(m[1] as string));
      return [layer, { imports: names(values), types: names(types) }];
    }),
  );
}

/** A file at `from` that imports `spec` (as a type only with `type`) and uses it. */
const importing = (from: string, spec: string, kind: 'value' | 'type' = 'value'): LintCase => ({
  filePath: from,
  code:
    kind === 'type'
      ? `import type * as m from '${spec}';\nexport type M = typeof m;\n`
      : `import * as m from '${spec}';\nexport const used = m;\n`,
});

/** Arrows against the table: [file, import, kind]. Each must be an error. */
const forbidden: readonly [string, string, ('value' | 'type')?][] = [
  // The domain is the bottom: it imports no other layer, not even types (issue 12: domain -> providers/types).
  ['src/domain/x.ts', '../providers'],
  ['src/domain/x.ts', '../providers/types', 'type'],
  ['src/domain/x.ts', '../activities'],
  ['src/domain/x.ts', '../workflows/charge'],
  ['src/domain/x.ts', '../client'],
  ['src/domain/x.ts', '../visibility'],
  ['src/domain/x.ts', '../config'],
  // Providers: only the domain; the simulator is a separate program, not an adapter's library.
  ['src/providers/x.ts', '../activities'],
  ['src/providers/x.ts', '../api/app'],
  ['src/providers/x.ts', '../client'],
  ['src/providers/x.ts', '../simulator/server'],
  ['src/providers/stripe/x.ts', '../../activities/attempt/failure'],
  ['src/providers/stripe/x.ts', '../../simulator/signature'],
  ['src/simulator/x.ts', '../providers/rest/adapter'],
  ['src/simulator/x.ts', '../api/app'],
  // Workflows: the domain, and activities as types only.
  ['src/workflows/x.ts', '../activities'],
  ['src/workflows/x.ts', '../providers/types', 'type'],
  ['src/workflows/x.ts', '../client'],
  ['src/workflows/x.ts', '../visibility'],
  // Activities sit below the workflows and the client (before: sweep -> client/visibility, -> workflows types).
  ['src/activities/x.ts', '../client/visibility'],
  ['src/activities/x.ts', '../workflows/review-item', 'type'],
  ['src/activities/x.ts', '../api/app'],
  ['src/activities/x.ts', '../metrics/worker-metrics'],
  ['src/activities/x.ts', '../config'],
  // The client: the domain, visibility, workflows as types.
  ['src/client/x.ts', '../providers/registry'],
  ['src/client/x.ts', '../activities'],
  ['src/client/x.ts', '../workflows'],
  ['src/client/x.ts', '../api/app'],
  // The API: client, domain, codec, metrics (before: the provider registry for webhook verifiers).
  ['src/api/x.ts', '../providers/registry'],
  ['src/api/x.ts', '../providers/types', 'type'],
  ['src/api/routes/x.ts', '../../providers/stripe/webhook'],
  ['src/api/x.ts', '../activities'],
  ['src/api/x.ts', '../workflows'],
  ['src/api/x.ts', '../config'],
  ['src/api/x.ts', '../stack'],
  ['src/api/x.ts', '../temporal-connection'],
  ['src/metrics/x.ts', '../client'],
  ['src/metrics/x.ts', '../activities'],
  // The breaker sits below the activities: it knows providers' failure details (types), not who calls it.
  ['src/breaker/x.ts', '../activities'],
  ['src/breaker/x.ts', '../providers'],
  ['src/breaker/x.ts', '../metrics/worker-metrics'],
  ['src/metrics/x.ts', '../breaker'],
  ['src/workflows/x.ts', '../breaker'],
  ['src/domain/x.ts', '../breaker', 'type'],
  ['src/visibility.ts', './client'],
  ['src/codec/x.ts', '../domain'],
  ['src/config/x.ts', '../providers'],
  ['src/config/x.ts', '../stack'],
  // Only the process entries are above the composition root.
  ['src/stack.ts', './worker'],
  ['src/stack.ts', './api-main'],
  ['src/api/x.ts', '../api-main'],
  ['src/worker.ts', './providers'],
  ['src/api-main.ts', './client'],
  // The API process goes through the composition root, never to the app straight.
  ['src/api-main.ts', './api/app'],
  // PostgreSQL: the ledger and key records sit on src/db, below the activities and the API; workflows never reach it.
  ['src/domain/x.ts', '../db'],
  ['src/db/x.ts', '../wallets'],
  ['src/db/x.ts', '../activities'],
  ['src/wallets/x.ts', '../activities'],
  ['src/wallets/x.ts', '../api/app'],
  ['src/wallets/x.ts', '../key-records'],
  ['src/key-records/x.ts', '../wallets'],
  ['src/workflows/x.ts', '../wallets'],
  ['src/workflows/x.ts', '../db'],
  ['src/client/x.ts', '../wallets'],
  // The package's entries and the in-process workers sit above the composition root; nothing below imports them.
  ['src/stack.ts', './payment-workers'],
  ['src/client/x.ts', '../package/client'],
  ['src/workflows/x.ts', '../package/domain'],
  ['src/package/x.ts', '../config'],
  ['src/package/x.ts', '../simulator/server'],
  ['src/payment-workers.ts', './config'],
  // Nothing in src/ reaches outside it.
  ['src/domain/x.ts', '../../test/helpers/payments'],
  ['src/stack.ts', '../scripts/lib/dev-server'],
];

/** Arrows the table allows: each must lint clean. */
const allowed: readonly [string, string, ('value' | 'type')?][] = [
  ['src/domain/x.ts', './errors'],
  ['src/providers/x.ts', '../domain/provider-payment'],
  ['src/providers/stripe/x.ts', '../../domain/errors'],
  ['src/providers/stripe/x.ts', '../simulator/adapter'],
  ['src/workflows/x.ts', '../activities', 'type'],
  ['src/activities/x.ts', '../providers'],
  ['src/activities/x.ts', '../visibility'],
  ['src/client/x.ts', '../visibility'],
  ['src/client/x.ts', '../workflows', 'type'],
  ['src/api/x.ts', '../client'],
  ['src/api/x.ts', '../domain/webhooks', 'type'],
  ['src/api/routes/x.ts', '../../metrics/api-metrics'],
  ['src/api/x.ts', '../codec'],
  ['src/metrics/x.ts', '../breaker', 'type'],
  ['src/activities/x.ts', '../breaker'],
  ['src/breaker/x.ts', '../providers/types', 'type'],
  ['src/stack.ts', './breaker/redis'],
  ['src/package/x.ts', '../breaker'],
  ['src/stack.ts', './api/app'],
  ['src/stack.ts', './providers/registry'],
  ['src/worker.ts', './stack'],
  ['src/api-main.ts', './stack'],
  ['src/api-main.ts', './config'],
  ['src/wallets/x.ts', '../db'],
  ['src/key-records/x.ts', '../db'],
  ['src/activities/x.ts', '../wallets'],
  ['src/api/routes/x.ts', '../../wallets'],
  ['src/metrics/x.ts', '../wallets', 'type'],
  ['src/stack.ts', './key-records'],
  ['src/payment-workers.ts', './stack'],
  ['src/package/x.ts', '../payment-workers'],
  ['src/package/x.ts', '../client'],
  ['src/package/x.ts', '../workflows'],
];

describe('the layer table, enforced by lint', () => {
  const cases = [...forbidden, ...allowed].map(([from, spec, kind]) => importing(from, spec, kind));
  let results: LintRun['results'];
  let layers: LintRun['layers'];

  beforeAll(() => {
    ({ results, layers } = lint(cases, true));
  }, 120_000);

  const resultOf = (i: number) => results[i]?.messages ?? ['missing result'];

  it.each(forbidden.map(([from, spec, kind = 'value'], i) => [from, spec, kind, i] as const))(
    '%s importing %s (%s) is an error',
    (_from, spec, _kind, i) => {
      const messages = resultOf(i);
      // One error, or two where the workflow sandbox's own rule refuses it too.
      expect(messages.length).toBeGreaterThan(0);
      for (const m of messages) expect(m).toMatch(/^no-restricted-imports: /);
      expect(messages[0]).toContain(`'${spec}'`);
    },
  );

  it.each(allowed.map(([from, spec, kind = 'value'], i) => [from, spec, kind, forbidden.length + i] as const))(
    '%s importing %s (%s) is allowed',
    (_from, _spec, _kind, i) => {
      expect(resultOf(i)).toEqual([]);
    },
  );

  it("lints by the table docs/architecture.md shows (the composition root: every layer below it but the simulator's)", () => {
    const documented = documentedLayers();
    expect(Object.keys(documented).sort()).toEqual(Object.keys(layers).sort());
    for (const [name, layer] of Object.entries(layers)) {
      const doc = documented[name];
      if (name === 'stack') {
        const above = ['worker', 'api-main', 'payment-workers', 'package', 'stack', 'simulator'];
        const below = Object.keys(layers).filter((l) => !above.includes(l));
        expect([...layer.imports].sort()).toEqual(below.map((l) => (l === 'api' ? 'api/app' : l)).sort());
        continue;
      }
      expect({ name, imports: [...(doc?.imports ?? [])].sort(), types: [...(doc?.types ?? [])].sort() }).toEqual({
        name,
        imports: [...layer.imports].sort(),
        types: [...(layer.types ?? [])].sort(),
      });
    }
  });

  it('src/ as it is has no import against the table', () => {
    const offending = results.slice(cases.length).filter((r) => r.messages.length > 0);
    expect(results.length - cases.length).toBeGreaterThan(50); // src/ was linted: the check is not vacuous
    expect(offending.map((r) => `${path.relative(root, r.filePath)}: ${r.messages.join('; ')}`)).toEqual([]);
  });
});
