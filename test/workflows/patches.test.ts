/**
 * The patch registry (src/workflows/patches.ts) is the inventory of code kept for older histories: every `patched()`
 * of the workflows takes its id from it, every entry is used, and every entry's new branch is carried by a recorded
 * history that the replay test replays (or the entry says why none can be).
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { PATCHES } from '../../src/workflows/patches';

const WORKFLOWS = path.resolve(__dirname, '../../src/workflows');
const HISTORIES = path.resolve(__dirname, '../histories');

const sources = readdirSync(WORKFLOWS)
  .filter((f) => f.endsWith('.ts') && f !== 'patches.ts')
  .map((f) => ({ file: f, text: readFileSync(path.join(WORKFLOWS, f), 'utf8') }));

/** The patch ids whose markers each recorded history holds. */
function markersByHistory(): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>();
  for (const f of readdirSync(HISTORIES).filter((n) => n.endsWith('.json'))) {
    const history = JSON.parse(readFileSync(path.join(HISTORIES, f), 'utf8')) as {
      events?: {
        markerRecordedEventAttributes?: {
          markerName?: string;
          details?: Record<string, { payloads?: { data: string }[] }>;
        };
      }[];
    };
    const ids = new Set<string>();
    for (const e of history.events ?? []) {
      const marker = e.markerRecordedEventAttributes;
      if (marker?.markerName !== 'core_patch') continue;
      for (const p of marker.details?.['patch-data']?.payloads ?? []) {
        ids.add((JSON.parse(Buffer.from(p.data, 'base64').toString('utf8')) as { id: string }).id);
      }
    }
    found.set(f, ids);
  }
  return found;
}

describe('the patch registry', () => {
  it('names every patched() of the workflows: no id written in place', () => {
    const literal = sources.flatMap(({ file, text }) =>
      [...text.matchAll(/(?:patched|deprecatePatch)\(\s*['"`]([^'"`]+)/g)].map((m) => `${file}: ${m[1]}`),
    );
    expect(literal).toEqual([]);
    const calls = sources.flatMap(({ text }) => [...text.matchAll(/(?:patched|deprecatePatch)\(/g)]).length;
    expect(calls).toBeGreaterThanOrEqual(Object.keys(PATCHES).length);
  });

  it('has no entry the workflows do not use, and each is used by one module', () => {
    for (const key of Object.keys(PATCHES)) {
      const users = sources.filter(({ text }) => text.includes(`PATCHES.${key}.id`)).map((s) => s.file);
      expect({ key, users: users.length }).toEqual({ key, users: 1 });
    }
  });

  it("has each entry's new branch in a recorded history, or says why none carries it", () => {
    const histories = markersByHistory();
    const table = Object.values(PATCHES).map((p) => {
      const carriers = [...histories].filter(([, ids]) => ids.has(p.id)).map(([f]) => f);
      return { id: p.id, histories: carriers.length, unrecorded: 'unrecorded' in p };
    });
    console.log(
      `[patches] ${table.length} patches; histories carrying each: ` +
        table.map((t) => `${t.id} ${t.histories}`).join(', '),
    );
    // Recorded: at least one history; declared unrecorded: none (a history that carries it retires the excuse).
    for (const t of table)
      expect({ id: t.id, recorded: t.histories > 0 }).toEqual({ id: t.id, recorded: !t.unrecorded });
  });
});
