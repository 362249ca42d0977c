import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { userInfo, tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT } from '../helpers/process.ts';

const asRoot = userInfo().uid === 0;

test('npm run dev as root where the postgres user cannot reach stops with one line, no stack', { skip: asRoot ? false : 'needs root' }, async () => {
  const locked = await mkdtemp(path.join(tmpdir(), 'mailroom-locked-'));
  const project = path.join(locked, 'project');
  await mkdir(project);
  try {
    // mkdtemp makes the directory 0700: only root may enter it.
    const child = spawn(path.join(ROOT, 'node_modules/.bin/tsx'), [path.join(ROOT, 'src/dev.ts')], {
      cwd: project,
      env: { PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`, HOME: process.env.HOME ?? '/root', PORT: '0', SINK_SMTP_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    child.stdout.resume();
    const code = await new Promise((resolve) => child.on('exit', resolve));
    assert.equal(code, 1);
    const lines = stderr.trim().split('\n');
    assert.equal(lines.length, 1, stderr);
    assert.match(lines[0]!, new RegExp(`^mailroom: the embedded PostgreSQL runs as the user "postgres" .* cannot enter ${locked}; .*DATABASE_URL$`));
  } finally {
    await rm(locked, { recursive: true, force: true });
  }
});
