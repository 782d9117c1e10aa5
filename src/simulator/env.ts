/** The simulator process's settings, read from the environment (it is a program of its own: no src/config/). */
import { z } from 'zod';

/** Every variable the simulator reads. */
export const SimulatorEnv = z.object({
  SIMULATOR_PORT: z.coerce.number().int().min(0).max(65_535).default(4010),
  SIMULATOR_HOST: z.string().min(1).default('127.0.0.1'),
  SIMULATOR_STATE_PATH: z.string().min(1).optional(),
  /** `1` logs one line per request (method, path, status; never keys or bodies). */
  SIMULATOR_LOG_REQUESTS: z.enum(['0', '1']).default('0'),
  /** As the other components read it: at `warn` and above the start/stop lines are left out (`npm start` says ready). */
  LOG_LEVEL: z.string().default('info'),
});
