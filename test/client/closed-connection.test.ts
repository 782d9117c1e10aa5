/**
 * A Temporal client connection closed while one of its calls waits for its retry (src/grpc-close-guard.ts): with the
 * SDK's interceptors the retry timer throws "Channel has been shut down" into the process (exit 1, the call never
 * answered); with the product's the call is answered CANCELLED and the process ends cleanly, as is a call made once the
 * connection is closed. Each side runs in a
 * process of its own (the uncaught exception would otherwise hit jest), against a port where nothing listens.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const fixture = path.join(__dirname, 'fixtures', 'closed-connection-call.ts');
const run = (interceptors: 'sdk-default' | 'product', when: 'in-retry' | 'after-close' = 'in-retry') =>
  spawnSync(process.execPath, ['--import', 'tsx', fixture, interceptors, when], { encoding: 'utf8', timeout: 30_000 });

describe('a connection closed while a call waits for its retry', () => {
  it("answers the call CANCELLED with the product's interceptors, and the process ends cleanly", () => {
    const { status, stdout, stderr } = run('product');
    expect(stderr).not.toContain('Channel has been shut down');
    expect(stdout).toContain('closed');
    expect(stdout).toContain('outcome: rejected: 1 CANCELLED: Channel has been shut down');
    expect(status).toBe(0);
  });

  it('answers a call made once the connection is closed CANCELLED too, the process ending cleanly', () => {
    // The close guard's own answer once went to the SDK's retry interceptor without the "no message" grpc-js gives a
    // failed unary call first: its status handler then threw (savedMessageNext is not a function) from the guard's
    // tick, uncaught, and the call never answered (CI of 1312735: a test file's teardown).
    const { status, stdout, stderr } = run('product', 'after-close');
    expect(stderr).toBe('');
    expect(stdout).toContain('outcome: rejected: 1 CANCELLED: Channel has been shut down');
    expect(status).toBe(0);
  });

  it("throws from the SDK's retry timer without them: the process dies, the call never answered", () => {
    const { status, stdout, stderr } = run('sdk-default');
    expect(stdout).toContain('closed');
    expect(stdout).not.toContain('outcome:');
    expect(stderr).toContain('Error: Channel has been shut down');
    expect(stderr).toMatch(/grpc-retry/);
    expect(status).toBe(1);
  });
});
