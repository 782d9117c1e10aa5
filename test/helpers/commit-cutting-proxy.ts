/**
 * A TCP proxy in front of PostgreSQL that loses the answer to a COMMIT: it forwards everything, and once it sees a
 * simple-query `COMMIT` go to the server it lets the server process it, then cuts the connection before the answer
 * reaches the client. The transaction committed; the client cannot know. With `cutText` set, it cuts the answer to
 * the next message that contains that text instead (a statement that is a transaction by itself, e.g. `wallet_debit(`).
 */
import net from 'node:net';

export interface CommitCuttingProxy {
  readonly port: number;
  /** Cut the next COMMIT's answer (one at a time). */
  armed: boolean;
  /** When set, the armed cut is of the next message containing this text, not of a COMMIT. */
  cutText: string | undefined;
  /** COMMITs whose answer was cut so far. */
  readonly cut: number;
  close(): Promise<void>;
}

const commit = Buffer.from('COMMIT\0');

export async function startCommitCuttingProxy(target: { host: string; port: number }): Promise<CommitCuttingProxy> {
  const sockets = new Set<net.Socket>();
  const state: { armed: boolean; cut: number; cutText: string | undefined } = {
    armed: false,
    cut: 0,
    cutText: undefined,
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    let cutting = false;
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      // 'Q' + length + "COMMIT\0": node-postgres sends COMMIT as a simple query.
      const cuts =
        state.cutText === undefined
          ? chunk[0] === 0x51 && chunk.subarray(5).equals(commit)
          : chunk.includes(state.cutText);
      if (state.armed && cuts) {
        state.armed = false;
        cutting = true;
        // Give the server time to commit, then drop both sides before its answer is relayed.
        setTimeout(() => {
          state.cut += 1;
          client.destroy();
          upstream.destroy();
        }, 200);
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!cutting) client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    get armed() {
      return state.armed;
    },
    set armed(v: boolean) {
      state.armed = v;
    },
    get cutText() {
      return state.cutText;
    },
    set cutText(v: string | undefined) {
      state.cutText = v;
    },
    get cut() {
      return state.cut;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
