import { z } from 'zod';
import { startSimulator, type SimLogEntry } from './server';

const Env = z.object({
  SIMULATOR_PORT: z.coerce.number().int().min(0).max(65_535).default(4010),
  SIMULATOR_HOST: z.string().min(1).default('127.0.0.1'),
  SIMULATOR_STATE_PATH: z.string().min(1).optional(),
  /** `1` logs one line per request (method, path, status; never keys or bodies). */
  SIMULATOR_LOG_REQUESTS: z.enum(['0', '1']).default('0'),
  /** As the other components read it: at `warn` and above the start/stop lines are left out (`npm start` says ready). */
  LOG_LEVEL: z.string().default('info'),
});

const line = (entry: SimLogEntry | Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...entry })}\n`);
};

async function main(): Promise<void> {
  const env = Env.parse(process.env);
  const sim = await startSimulator({
    port: env.SIMULATOR_PORT,
    host: env.SIMULATOR_HOST,
    statePath: env.SIMULATOR_STATE_PATH,
    logger: (entry) => {
      if (entry.level === 'error' || env.SIMULATOR_LOG_REQUESTS === '1') line(entry);
    },
  });
  const info = (entry: Record<string, unknown>) => {
    if (!['warn', 'error', 'fatal', 'silent'].includes(env.LOG_LEVEL)) line({ level: 'info', ...entry });
  };
  info({ msg: 'simulator listening', url: sim.url, persistent: env.SIMULATOR_STATE_PATH !== undefined });

  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    info({ msg: 'simulator stopping', signal });
    sim.close().then(
      () => process.exit(0),
      (err: unknown) => {
        line({ level: 'error', msg: 'simulator close failed', error: String(err) });
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err: unknown) => {
  line({ level: 'error', msg: 'simulator failed to start', error: String(err) });
  process.exit(1);
});
