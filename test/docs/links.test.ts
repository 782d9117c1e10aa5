/**
 * The docs stay true: every relative link in README.md and docs/**.md resolves inside the repository (a file or
 * folder that exists, and for a Markdown target with `#anchor`, a heading that produces that anchor).
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

/** The Markdown files under test: README.md and every .md under docs/. */
function markdownFiles(): string[] {
  const out = [path.join(ROOT, 'README.md')];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const full = path.join(dir, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (name.endsWith('.md')) out.push(full);
    }
  };
  if (existsSync(path.join(ROOT, 'docs'))) walk(path.join(ROOT, 'docs'));
  return out;
}

/** The text outside fenced code blocks, with inline code spans blanked (links inside code are not links). */
function prose(markdown: string): string {
  return markdown
    .replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '')
    .replace(/`[^`\n]*`/g, (m) => (m.includes('](') ? '' : m));
}

/** GitHub's anchors for the headings of a Markdown text (lower case, punctuation dropped, spaces to hyphens). */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = (heading ?? '')
      .replace(/`/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every dead relative link of one Markdown file, as `file: target (why)`. */
export function deadLinks(file: string, markdown: string, root = ROOT): string[] {
  const dead: string[] = [];
  const text = prose(markdown);
  const targets = [...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1] ?? '');
  for (const target of targets) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
    const [rawPath = '', anchor] = target.split('#');
    const resolved = rawPath === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(rawPath));
    const rel = path.relative(root, resolved);
    const where = `${path.relative(root, file)}: ${target}`;
    if (rel.startsWith('..') || path.isAbsolute(rel)) dead.push(`${where} (outside the repository)`);
    else if (!existsSync(resolved)) dead.push(`${where} (no such file)`);
    else if (anchor !== undefined && resolved.endsWith('.md')) {
      const content = resolved === file ? markdown : readFileSync(resolved, 'utf8');
      if (!anchorsOf(content).has(anchor)) dead.push(`${where} (no heading for #${anchor})`);
    }
  }
  return dead;
}

it('finds the docs: README.md and the five pages of docs/', () => {
  const names = markdownFiles().map((f) => path.relative(ROOT, f));
  expect(names).toEqual(
    expect.arrayContaining([
      'README.md',
      'docs/architecture.md',
      'docs/http-api.md',
      'docs/provider-contract.md',
      'docs/operations.md',
      'docs/resilience-checklist.md',
    ]),
  );
});

it('has no dead relative link in README.md and docs/**.md', () => {
  const dead = markdownFiles().flatMap((f) => deadLinks(f, readFileSync(f, 'utf8')));
  expect(dead).toEqual([]);
});

it('links from the README into the docs', () => {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  for (const page of ['architecture', 'http-api', 'provider-contract', 'operations', 'resilience-checklist'])
    expect(readme).toContain(`](docs/${page}.md`);
});

describe('the link checker itself', () => {
  const file = path.join(ROOT, 'README.md');

  it('reports a missing file, a link out of the repository and a missing anchor', () => {
    const md = [
      '[gone](docs/no-such-page.md)',
      '[shared](../shared/DESIGN.md)',
      '[anchor](docs/operations.md#no-such-heading)',
      '[ok](docs/operations.md#metrics) [web](https://temporal.io) [self](#layout)',
      '```sh',
      '[in code](nowhere.md)',
      '```',
      '## Layout',
    ].join('\n');
    expect(deadLinks(file, md)).toEqual([
      'README.md: docs/no-such-page.md (no such file)',
      'README.md: ../shared/DESIGN.md (outside the repository)',
      'README.md: docs/operations.md#no-such-heading (no heading for #no-such-heading)',
    ]);
  });

  it('makes GitHub anchors from headings', () => {
    expect([...anchorsOf('## `unknown` and `needs_review`\n# A, b: c!\n# A, b: c!')]).toEqual([
      'unknown-and-needs_review',
      'a-b-c',
      'a-b-c-1',
    ]);
  });
});

describe('references a reader can follow', () => {
  /** Source, scripts, bench and test files (this file names the notes to test the checker). */
  function codeFiles(): string[] {
    const out: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const full = path.join(dir, name);
        if (statSync(full).isDirectory()) walk(full);
        else if (/\.(ts|sh|md)$/.test(name) && full !== __filename) out.push(full);
      }
    };
    for (const d of ['src', 'scripts', 'bench', 'test', 'docs']) walk(path.join(ROOT, d));
    return out;
  }

  it('never point at the team notes outside the repository (DESIGN.md, STYLE.md, CONTRACTS.md)', () => {
    const pointers = codeFiles().flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .map((line, i) => ({ line, at: `${path.relative(ROOT, f)}:${i + 1}` }))
        .filter(({ line }) => /\b(DESIGN|STYLE|CONTRACTS)\.md\b/.test(line))
        .map(({ at }) => at),
    );
    expect(pointers).toEqual([]);
  });
});
