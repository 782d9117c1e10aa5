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

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', '.temporal/', 'coverage/', 'eslint.config.mjs', 'jest.config.js'] },
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
    // Workflow code runs in Temporal's deterministic sandbox: no I/O, no Node built-ins.
    files: ['src/workflows/**/*.ts', 'src/domain/**/*.ts', 'bench/peers/bare-workflow.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: builtinPaths, patterns: sandboxPatterns }] },
  },
  {
    // ...and no zod: every module of the bundle is evaluated again for each workflow (bench/README.md). The modules
    // below hold zod schemas; their zod-free halves are retry-policy, review-item-definitions, sweep-window and
    // definitions. Types may still come from anywhere.
    files: ['src/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
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
      ],
    },
  },
);
