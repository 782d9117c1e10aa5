/**
 * `npm run temporal -- <args>`: the provisioned Temporal CLI (under .temporal/, not on the PATH), e.g.
 * `npm run temporal -- workflow list --query 'PaymentStatus="needs_review"'`. It talks to TEMPORAL_ADDRESS (the CLI's
 * own variable; default 127.0.0.1:7233, `npm start`'s frontend). Exits with the CLI's status.
 */
import { spawn } from 'node:child_process';
import { TEMPORAL_CLI, resolveBinary } from './lib/temporal-binaries';

async function main(): Promise<void> {
  const cli = await resolveBinary(TEMPORAL_CLI);
  if (cli.executable.type !== 'existing-path') {
    throw new Error(`the Temporal CLI is not provisioned (npm run temporal:provision); tried: ${cli.tried.join('; ')}`);
  }
  const child = spawn(cli.executable.path, process.argv.slice(2), { stdio: 'inherit' });
  child.once('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}

main().catch((err: unknown) => {
  console.error(`[temporal] ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
