import { SimulatorEnv as Env } from './env';
import { startSimulator, type SimLogEntry } from './server';

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
