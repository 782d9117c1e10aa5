// @ts-check
import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];
const builtinPaths = nodeBuiltins.map((name) => ({
  name,
  message: 'Workflow and domain code must stay deterministic: no Node built-ins.',
}));
const sandboxPatterns = [
  {
    group: ['**/activities', '**/activities/*'],
    allowTypeImports: true,
    message: 'Import activities as types only.',
  },
  {
    group: ['**/codec', '**/codec/*', '**/metrics/*', 'prom-client'],
    message: 'Encryption and metrics run in the worker, outside the workflow sandbox (sinks report from it).',
  },
  {
    group: ['@temporalio/client', '@temporalio/worker', '@temporalio/activity'],
    message: 'Not available inside the workflow sandbox.',
  },
];

/**
 * The layer table of docs/architecture.md#layers, enforced: what each part of src/ may import from the rest of src/.
 * `types`: type-only imports (`import type`), nothing at run time. Anything else in src/ is refused, as is anything
 * outside src/. The third-party rules of the workflow sandbox come on top (below).
 */
export const layers = {
  domain: { imports: [] },
  codec: { imports: [] },
  'temporal-connection': { file: true, imports: [] },
  simulator: { imports: ['domain'] },
  providers: { imports: ['domain'] },
  visibility: { file: true, imports: ['domain'] },
  config: { imports: ['domain', 'codec'] },
  // PostgreSQL: the pool, migrations and failure classes; the ledger and the key records over it.
  db: { imports: ['domain'] },
  wallets: { imports: ['domain', 'db'] },
  'key-records': { imports: ['db'] },
  // The payments' database as a process opens it (the stack, or an order service through the package): the pool,
  // migrations, pruning, and the repositories the workers and the client share.
  'payment-database': { file: true, imports: ['db', 'wallets', 'key-records'], types: ['client'] },
  // The per-provider circuit breaker: its contract, counting, the in-process and Redis stores.
  breaker: { imports: ['domain'], types: ['providers'] },
  // Webhooks to merchants: endpoints and the event queue on PostgreSQL, signing, delivery, their activities.
  'merchant-webhooks': { imports: ['domain', 'db'] },
  workflows: { imports: ['domain'], types: ['activities', 'merchant-webhooks'] },
  activities: { imports: ['domain', 'providers', 'visibility', 'db', 'wallets', 'breaker', 'key-records'] },
  metrics: { imports: ['domain'], types: ['breaker', 'config', 'wallets', 'merchant-webhooks'] },
  client: { imports: ['domain', 'visibility'], types: ['workflows'] },
  schedules: { file: true, imports: ['domain'], types: ['workflows'] },
  api: { imports: ['domain', 'client', 'codec', 'metrics', 'wallets'], types: ['merchant-webhooks'] },
  // The composition root wires every layer; only the process entries are above it.
  stack: {
    file: true,
    imports: [
      ...['domain', 'codec', 'temporal-connection', 'providers', 'visibility', 'config', 'workflows'],
      ...[
        'db',
        'wallets',
        'key-records',
        'payment-database',
        'merchant-webhooks',
        'breaker',
        'activities',
        'metrics',
        'client',
        'schedules',
      ],
      'api/app',
    ],
  },
  // Process entries: they load the config and start the stack.
  worker: { file: true, imports: ['config', 'metrics', 'schedules', 'stack'] },
  'api-main': { file: true, imports: ['config', 'stack'] },
  // The workers inside another program's process, from that program's connection and providers.
  'payment-workers': {
    file: true,
    imports: ['domain', 'metrics', 'schedules', 'stack'],
    types: ['payment-database'],
  },
  // The package's entry points (package.json `exports`): re-exports only, so a move inside src/ changes these alone.
  package: {
    imports: [
      ...['domain', 'codec', 'providers', 'workflows', 'breaker', 'metrics', 'client', 'stack'],
      ...['db', 'wallets', 'key-records', 'payment-workers', 'payment-database'],
    ],
  },
};
const targets = Object.keys(layers);
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** The `no-restricted-imports` patterns of a file of `layer` that sits `depth` folders below src/. */
function layerPatterns(name, depth) {
  const layer = layers[name];
  const allowed = [...layer.imports, ...(layer.types ?? [])];
  const toSrc = depth === 0 ? './' : '../'.repeat(depth);
  // A folder may import itself.
  const forbidden = targets.filter((t) => t !== name && !allowed.includes(t));
  const spec = (names) => `^${escape(toSrc)}(${names.map(escape).join('|')})(\\.[jt]s)?(/.*)?$`;
  // `api/app` may be allowed while `api` is not: match the allowed sub-path first by excluding it.
  const except = allowed.filter((a) => a.includes('/'));
  const patterns = [
    {
      regex: except.length
        ? `^(?!${escape(toSrc)}(${except.map(escape).join('|')})(\\.[jt]s)?$)${spec(forbidden).slice(1)}`
        : spec(forbidden),
      message: `src/${name} ${
        layer.imports.length ? `may import only ${layer.imports.join(', ')}` : 'imports nothing'
      } from the rest of src/${layer.types ? ` (and types of ${layer.types.join(', ')})` : ''}: docs/architecture.md#layers.`,
    },
    {
      regex: `^${escape('../'.repeat(depth + 1))}`,
      message: 'src/ imports nothing from outside src/.',
    },
  ];
  if (layer.types) {
    patterns.push({
      regex: spec(layer.types),
      allowTypeImports: true,
      message: `src/${name} may import only the types of ${layer.types.join(', ')}: docs/architecture.md#layers.`,
    });
  }
  return patterns;
}

/** The files of `layer` that sit `depth` folders below src/. */
function layerFiles(name, depth) {
  if (layers[name].file) return depth === name.split('/').length - 1 ? [`src/${name}.ts`] : [];
  return depth === 0 ? [] : [`src/${name}/${'*/'.repeat(depth - 1)}*.ts`];
}

/** Restrictions of the workflow sandbox, by kind of file. */
const sandboxRestrictions = {
  // Workflow code runs in Temporal's deterministic sandbox: no I/O, no Node built-ins.
  domain: { paths: builtinPaths, patterns: sandboxPatterns },
  // ...and no zod: every module of the bundle is evaluated again for each workflow (bench/README.md). The modules
  // below hold zod schemas; their zod-free halves are retry-policy, review-item-definitions, sweep-window and
  // definitions. Types may still come from anywhere.
  workflows: {
    paths: [
      ...builtinPaths,
      { name: 'zod', message: 'No zod in workflow code: every workflow would evaluate it again.' },
    ],
    patterns: [
      ...sandboxPatterns,
      {
        // `../domain` (the barrel) and the modules with zod schemas; their zod-free halves stay allowed.
        regex:
          '(^|/)domain(/index)?$|/domain/(retry|review-items|sweep|provider-payment|payment|money|workflow-inputs|api-schemas)$',
        allowTypeImports: true,
        message:
          'This module builds zod schemas: import its types only, and values from its zod-free half ' +
          '(retry-policy, review-item-definitions, sweep-window, definitions).',
      },
    ],
  },
};

/** One config block per layer and depth: the layer's arrows plus, for workflow code, the sandbox's restrictions. */
const layerConfigs = Object.keys(layers).flatMap((name) =>
  [0, 1, 2, 3, 4].flatMap((depth) => {
    const files = layerFiles(name, depth);
    if (files.length === 0) return [];
    const sandbox = sandboxRestrictions[name];
    return [
      {
        files,
        rules: {
          'no-restricted-imports': [
            'error',
            {
              ...(sandbox ? { paths: sandbox.paths } : {}),
              patterns: [...(sandbox?.patterns ?? []), ...layerPatterns(name, depth)],
            },
          ],
        },
      },
    ];
  }),
);

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'dist/',
      '.temporal/',
      'coverage/',
      'eslint.config.mjs',
      'jest.config.js',
      '.dependency-cruiser.cjs',
    ],
  },
  eslint.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { prefer: 'type-imports', fixStyle: 'inline-type-imports' },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // The bench's bare-workflow peer runs in the sandbox too.
    files: ['bench/peers/bare-workflow.ts'],
    rules: { 'no-restricted-imports': ['error', sandboxRestrictions.domain] },
  },
  ...layerConfigs,
);
