/**
 * The stack's component logs: one file per component in one directory (`<name>.log`, appended across starts), so the
 * terminal keeps the supervisor's own lines while everything a component prints is kept; the last lines of each are
 * at hand for the supervisor to show when that component crashes or fails to start.
 */
import { type WriteStream, createWriteStream, mkdirSync } from 'node:fs';
import path from 'node:path';

/** How many recent lines of each component are kept in memory. */
const TAIL_LINES = 12;

/** The log files of one stack. */
export class LogFiles {
  private readonly streams = new Map<string, WriteStream>();
  private readonly tails = new Map<string, string[]>();

  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  /** The file of component `name`. */
  pathOf(name: string): string {
    return path.join(this.dir, `${name}.log`);
  }

  /** A writer of `name`'s lines (to its file, and into its tail). */
  writer(name: string): (line: string) => void {
    let stream = this.streams.get(name);
    if (!stream) {
      stream = createWriteStream(this.pathOf(name), { flags: 'a' });
      // A full disk must not take the supervisor down with it.
      stream.on('error', () => undefined);
      this.streams.set(name, stream);
      this.tails.set(name, []);
    }
    const s = stream;
    const tail = this.tails.get(name) as string[];
    return (line) => {
      s.write(`${line}\n`);
      tail.push(line);
      if (tail.length > TAIL_LINES) tail.shift();
    };
  }

  /** The last lines `name` wrote since this process started. */
  lastLines(name: string): readonly string[] {
    return [...(this.tails.get(name) ?? [])];
  }

  /** Flushes and closes every file. */
  async close(): Promise<void> {
    await Promise.all([...this.streams.values()].map((s) => new Promise<void>((resolve) => s.end(resolve))));
    this.streams.clear();
  }
}
