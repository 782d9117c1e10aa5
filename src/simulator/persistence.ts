import { randomBytes } from 'node:crypto';
import { open, readFile, rename, writeFile, unlink, type FileHandle } from 'node:fs/promises';
import { SimChanges, SimState } from './state';
import type { SimStore } from './store';

/**
 * Reads a saved state: its snapshot (the first line), then every journal line after it in order. Undefined when the
 * file does not exist yet. A corrupt snapshot or journal line is an error, never silently reset; only a last line cut
 * short (a crash while it was being appended, so its save never resolved) is dropped.
 */
export async function loadState(path: string): Promise<{ state: SimState; changes: SimChanges[] } | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const [first = '', ...rest] = text.split('\n');
  const state = SimState.parse(JSON.parse(first));
  const changes: SimChanges[] = [];
  for (const [i, line] of rest.entries()) {
    if (line === '') continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch (err) {
      // Every line is written with its newline: a last line without one is an append the crash cut short.
      if (i === rest.length - 1) break;
      throw new Error(`state file ${path}: journal line ${i + 2} is not JSON (${String(err)})`);
    }
    changes.push(SimChanges.parse(parsed));
  }
  return { state, changes };
}

/** Loads a saved state into a store (its snapshot, then its journal); false when there is no file yet. */
export async function restoreState(store: SimStore, path: string): Promise<boolean> {
  const saved = await loadState(path);
  if (!saved) return false;
  store.load(saved.state);
  for (const changes of saved.changes) store.applyChanges(changes);
  return true;
}

/** What the journal saves: the whole state, or what changed since the last save. */
export interface JournalSource {
  snapshot(): SimState;
  takeChanges(): SimChanges | 'snapshot';
}

/** Below this many journal bytes a file is never compacted (a snapshot of a small state is cheap anyway). */
const MIN_COMPACT_BYTES = 1 << 20;

/**
 * Saves the state as a snapshot followed by journal lines, one per save, each naming only what changed: a save's cost
 * follows what changed, not everything held. When the lines outgrow the snapshot, the next save writes a new snapshot
 * (a temporary file, then a rename: atomic), so the file stays within about twice the state and a restart replays at
 * most that. Saves are serialized and coalesce bursts: a save requested while one is being written is served by a
 * single follow-up that takes every change made until it starts.
 */
export class StateJournal {
  private writing: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  private handle: FileHandle | undefined;
  private snapshotBytes = 0;
  private journalBytes = 0;
  /** A write failed: the changes it took are not on disk, so the next save writes everything. */
  private failed = false;

  constructor(
    private readonly path: string,
    private readonly source: JournalSource,
    private readonly onError: (err: unknown) => void,
    /** Journal bytes below which the file is never compacted. */
    private readonly minCompactBytes = MIN_COMPACT_BYTES,
  ) {}

  /** Starts the file with a snapshot of the current state (compacting whatever was loaded). */
  async open(): Promise<void> {
    this.source.takeChanges();
    await this.writeSnapshot(JSON.stringify(this.source.snapshot()));
  }

  /** Resolves once a write that includes every change made before this call is on disk. */
  save(): Promise<void> {
    if (this.queued) return this.queued;
    if (!this.writing) return this.start();
    this.queued = this.writing.then(() => {
      this.queued = undefined;
      return this.start();
    });
    return this.queued;
  }

  /** Waits for the writes under way and releases the file. */
  async close(): Promise<void> {
    await this.queued;
    await this.writing;
    await this.handle?.close();
    this.handle = undefined;
  }

  private start(): Promise<void> {
    // Serialize synchronously, so the write holds exactly the changes made before it started.
    const changes = this.source.takeChanges();
    const whole =
      changes === 'snapshot' || this.failed || this.journalBytes > Math.max(this.snapshotBytes, this.minCompactBytes);
    const write = whole
      ? this.writeSnapshot(JSON.stringify(this.source.snapshot()))
      : this.append(`${JSON.stringify(changes)}\n`);
    const done = write
      .then(() => {
        this.failed = false;
      })
      .catch((err: unknown) => {
        this.failed = true;
        this.onError(err);
      })
      .finally(() => {
        if (this.writing === done) this.writing = undefined;
      });
    this.writing = done;
    return done;
  }

  private async append(line: string): Promise<void> {
    if (!this.handle) throw new Error(`state file ${this.path} is not open`);
    await this.handle.write(line);
    this.journalBytes += Buffer.byteLength(line);
  }

  private async writeSnapshot(text: string): Promise<void> {
    const tmp = `${this.path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      await writeFile(tmp, `${text}\n`, 'utf8');
      await rename(tmp, this.path);
    } catch (err) {
      await unlink(tmp).catch(() => undefined);
      throw err;
    }
    await this.handle?.close();
    this.handle = await open(this.path, 'a');
    this.snapshotBytes = Buffer.byteLength(text) + 1;
    this.journalBytes = 0;
  }
}
