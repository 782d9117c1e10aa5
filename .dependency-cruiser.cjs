/**
 * No circles in src/: `npm run lint` runs this after ESLint (`depcruise src`). Type-only imports count: a circle of
 * types is still two files that cannot be read apart (eslint-plugin-import's `no-cycle` skips them, which is why this
 * is dependency-cruiser). The layer table itself stays in eslint.config.mjs.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'Files of src/ that import each other in a loop (type-only imports included): docs/architecture.md#layers.',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Count `import type` and `import { type X }` too: TypeScript erases them, the reader does not.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
