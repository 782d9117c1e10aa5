/**
 * Validates an OpenAPI document with @apidevtools/swagger-parser in a child Node process: the parser's dependencies
 * are ES modules, which Node 20 loads through require() but jest's CommonJS runtime (before Node 24.9) cannot.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

const script = `
require('@apidevtools/swagger-parser')
  .validate(process.argv[1])
  .then(() => process.exit(0), (err) => { process.stderr.write(String(err && err.message)); process.exit(1); });
`;

/** Resolves when the document is valid; rejects with the parser's message otherwise. */
export async function validateOpenApi(doc: unknown): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'openapi-'));
  const file = path.join(dir, 'openapi.json');
  try {
    await writeFile(file, JSON.stringify(doc));
    await new Promise<void>((resolve, reject) => {
      execFile(
        process.execPath,
        ['-e', script, file],
        { cwd: path.resolve(__dirname, '../..') },
        (err, _out, stderr) =>
          err ? reject(new Error(`invalid OpenAPI document: ${stderr || err.message}`)) : resolve(),
      );
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
