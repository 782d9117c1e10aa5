import { randomBytes } from 'node:crypto';
import { readFile, rename, writeFile, unlink } from 'node:fs/promises';
import { SimState } from './state';

/** Reads a saved state; undefined when the file does not exist yet. A corrupt file is an error, never silently reset. */
export async function loadState(path: string): Promise<SimState | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return SimState.parse(JSON.parse(text));
}

/**
 * Saves snapshots atomically (temp file + rename) and coalesces bursts: a save requested while one is being written
 * is served by a single follow-up write that snapshots the state when it starts.
 */
export class StateSaver {
  private writing: Promise<void> | undefined;
  private queued: Promise<void> | undefined;

  constructor(
    private readonly path: string,
    private readonly snapshot: () => SimState,
    private readonly onError: (err: unknown) => void,
  ) {}

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

  private start(): Promise<void> {
    // Snapshot synchronously, so the write holds exactly the changes made before it started.
    const text = JSON.stringify(this.snapshot());
    const done = this.write(text)
      .catch(this.onError)
      .finally(() => {
        if (this.writing === done) this.writing = undefined;
      });
    this.writing = done;
    return done;
  }

  private async write(text: string): Promise<void> {
    const tmp = `${this.path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      await writeFile(tmp, text, 'utf8');
      await rename(tmp, this.path);
    } catch (err) {
      await unlink(tmp).catch(() => undefined);
      throw err;
    }
  }
}
