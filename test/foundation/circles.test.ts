/**
 * No circles in src/, enforced by lint (`npm run lint` runs dependency-cruiser with .dependency-cruiser.cjs after
 * ESLint): the project's own rule, run by the same CLI, refuses a circle of value imports and a circle made of type-only
 * imports alike (the circles src/domain had were all type-only), and finds none in src/ as it is.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(__dirname, '..', '..');

interface Violation {
  readonly rule: { readonly name: string };
  readonly from: string;
  readonly cycle?: readonly { readonly name: string }[];
}

/** dependency-cruiser's CLI with the project's rules over `dir`'s src/, as `npm run lint` runs it. */
function cruise(dir: string): { violations: Violation[]; modules: number } {
  let out: string;
  try {
    out = execFileSync(
      path.join(root, 'node_modules', '.bin', 'depcruise'),
      ['src', '--config', path.join(root, '.dependency-cruiser.cjs'), '--output-type', 'json'],
      { cwd: dir, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
    );
  } catch (err) {
    // It exits non-zero when it finds violations; the report is on stdout all the same.
    out = (err as { stdout: string }).stdout;
  }
  const report = JSON.parse(out) as {
    summary: { violations: Violation[]; totalCruised: number };
  };
  return { violations: report.summary.violations, modules: report.summary.totalCruised };
}

describe('circles in src/, refused by lint', () => {
  let fixture: string;

  beforeAll(() => {
    fixture = mkdtempSync(path.join(os.tmpdir(), 'pw-circles-'));
    const write = (file: string, text: string) => {
      mkdirSync(path.dirname(path.join(fixture, file)), { recursive: true });
      writeFileSync(path.join(fixture, file), text);
    };
    write('tsconfig.json', JSON.stringify({ compilerOptions: { strict: true } }));
    // A circle of values.
    write('src/values/a.ts', "import { b } from './b';\nexport const a = () => b;\n");
    write('src/values/b.ts', "import { a } from './a';\nexport const b = () => a;\n");
    // A circle of types only, one side `import type`, the other an inline `type` specifier (as src/ writes them).
    write('src/types/input.ts', "import type { Window } from './window';\nexport interface Input { w: Window }\n");
    write('src/types/window.ts', "import { type Input } from './input';\nexport type Window = Pick<Input, 'w'>;\n");
    // No circle: one way only.
    write('src/oneway/top.ts', "import { low } from './low';\nexport const top = low;\n");
    write('src/oneway/low.ts', 'export const low = 1;\n');
  });

  afterAll(() => rmSync(fixture, { recursive: true, force: true }));

  it('refuses a circle of values and a circle of type-only imports, and nothing else', () => {
    const { violations } = cruise(fixture);
    const circles = violations.filter((v) => v.rule.name === 'no-circular').map((v) => v.from.split('/')[1]);
    expect([...new Set(circles)].sort()).toEqual(['types', 'values']);
    expect(violations.filter((v) => v.rule.name !== 'no-circular')).toEqual([]);
  });

  it('finds none in src/ as it is', () => {
    const { violations, modules } = cruise(root);
    expect(modules).toBeGreaterThan(50); // src/ was read: the check is not vacuous
    expect(violations.map((v) => [v.from, ...(v.cycle ?? []).map((c) => c.name)].join(' -> '))).toEqual([]);
  });
});
